"""A scripted, long function-calling session that ships with memos.

A personal assistant helps Maya plan a trip to Lisbon and sort out an online order over
200+ turns. Constraints are stated in the first turns, an order id and an address are
used early and asked about again near the end, the address is corrected half-way, and
most turns call tools whose JSON results are large enough to force paging.

:func:`demo_session` returns the turns; each turn is a user message and the agent's
scripted steps (tool calls with their results, then a reply). The session is generated
from a seed, so it is the same on every machine.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CONSTRAINTS", "IDENTIFIERS", "SYSTEM_PROMPT", "Step", "Turn", "demo_session"]

SYSTEM_PROMPT = (
    "You are Aria, a travel and shopping assistant. Use the tools to look things up; "
    "respect every constraint the user has stated."
)

CONSTRAINTS = (
    "I don't eat spicy food, so never suggest spicy dishes.",
    "Never book anything that starts before 9am.",
    "My hotel budget is at most $180 per night.",
    "Always send confirmations to maya.chen@example.com only.",
    "我不吃辣，所有带辣椒的推荐都不要。",
)

ORDER_ID = "ORD-12345"
FIRST_ADDRESS = "14 Rua Augusta, 1100-053 Lisbon"
CORRECTED_ADDRESS = "42 Rua do Ouro, 1100-060 Lisbon"
TRACKING = "1Z999AA10123456784"
BOOKING = "BK-77812"

IDENTIFIERS = (ORDER_ID, TRACKING, BOOKING, "maya.chen@example.com", CORRECTED_ADDRESS)

_NEIGHBOURHOODS = ["Alfama", "Baixa", "Chiado", "Belém", "Príncipe Real", "Cais do Sodré", "Graça", "Avenidas Novas"]
_CUISINES = ["Portuguese", "seafood", "vegetarian", "Italian", "Japanese", "Goan", "Brazilian", "bakery"]
_DISHES = ["bacalhau à brás", "grilled sardines", "caldo verde", "pastel de nata", "arroz de marisco",
           "polvo à lagareiro", "bifana", "piri-piri chicken", "cataplana", "feijoada"]
_SIGHTS = ["Jerónimos Monastery", "Belém Tower", "São Jorge Castle", "Gulbenkian Museum", "LX Factory",
           "Oceanário", "MAAT", "Tile Museum", "Santa Justa Lift", "Pena Palace"]
_PLACE_KINDS = ["Casa", "Taberna", "O Cantinho", "Tasca", "Café"]
_PLACE_NAMES = ["do Mar", "da Sé", "Lisboeta", "Azul", "Velha", "do Bairro"]
_HOTEL_KINDS = ["Suites", "Boutique", "Inn", "Palace", "Lofts"]
_SMALL_TALK = ["Thanks!", "Great, thank you.", "ok", "Sounds good.", "Perfect!", "Cool, got it."]


@dataclass(frozen=True)
class Step:
    """One model call of the scripted agent: tool calls with their results, or a reply."""

    tool_calls: tuple[dict[str, Any], ...] = ()
    results: tuple[str, ...] = ()
    reply: str | None = None

    def assistant_message(self) -> dict[str, Any]:
        """The assistant message this step adds."""
        if self.tool_calls:
            return {"role": "assistant", "content": None, "tool_calls": [dict(c) for c in self.tool_calls]}
        return {"role": "assistant", "content": self.reply or ""}

    @property
    def memory_tool(self) -> bool:
        """Whether the step calls memos' own tools (its results come from memos, not the script)."""
        return bool(self.tool_calls) and not self.results

    def tool_messages(self) -> list[dict[str, Any]]:
        """The tool results this step adds, one per call (none for a memory-tool step)."""
        if self.memory_tool:
            return []
        pairs = zip(self.tool_calls, self.results, strict=True)
        return [{"role": "tool", "tool_call_id": c["id"], "content": r} for c, r in pairs]


@dataclass(frozen=True)
class Turn:
    """A user message and the agent's steps in answer to it."""

    number: int
    user: str
    steps: tuple[Step, ...] = field(default_factory=tuple)
    tag: str = ""


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.calls = 0
        self.turns: list[Turn] = []

    def call(self, name: str, **args: Any) -> dict[str, Any]:
        self.calls += 1
        return {"id": f"call_{self.calls:04d}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}

    def turn(self, user: str, *steps: Step, tag: str = "") -> None:
        self.turns.append(Turn(len(self.turns) + 1, user, tuple(steps), tag))

    def restaurants(self, area: str, cuisine: str) -> str:
        rng = self.rng
        items = []
        for i in range(6):
            dish = rng.choice(_DISHES)
            items.append({
                "name": f"{rng.choice(_PLACE_KINDS)} {rng.choice(_PLACE_NAMES)} {i + 1}",
                "area": area, "cuisine": cuisine, "rating": round(rng.uniform(3.6, 4.9), 1),
                "price_eur": rng.randint(12, 48), "signature_dish": dish,
                "spicy": dish == "piri-piri chicken", "opens": f"{rng.choice([8, 9, 11, 12, 18])}:00",
                "review": "Locals praise the friendly service and the view; book ahead on weekends.",
            })
        return json.dumps({"query": {"area": area, "cuisine": cuisine}, "results": items})

    def hotels(self, area: str) -> str:
        rng = self.rng
        items = [{"hotel_id": f"HTL-{rng.randint(1000, 9999)}", "name": f"{area} {rng.choice(_HOTEL_KINDS)}",
                  "price_per_night_usd": rng.randint(95, 260), "rating": round(rng.uniform(3.8, 4.9), 1),
                  "check_in_from": "15:00", "breakfast": rng.choice([True, False]),
                  "notes": "Quiet street, 5 minutes from the tram; free cancellation up to 48 hours before arrival."}
                 for _ in range(5)]
        return json.dumps({"area": area, "results": items})

    def weather(self, day: int) -> str:
        rng = self.rng
        return json.dumps({"city": "Lisbon", "date": f"2026-06-{day:02d}", "high_c": rng.randint(21, 31),
                           "low_c": rng.randint(14, 19), "summary": rng.choice(["sunny", "light clouds", "windy", "clear"]),
                           "uv_index": rng.randint(5, 10), "hourly": [rng.randint(15, 30) for _ in range(24)]})


def demo_session(turns: int = 220, seed: int = 7) -> list[Turn]:
    """The scripted session: ``turns`` turns (at least 40), the same for a given seed."""
    if turns < 40:
        raise ValueError("the demo session needs at least 40 turns")
    b = _Builder(seed)
    rng = b.rng
    b.turn("Hi Aria! I'm planning a week in Lisbon in June and I also need help with an online order.",
           Step(reply="Happy to help with both. Tell me what matters to you and I'll keep it in mind."))
    for rule in CONSTRAINTS:
        b.turn(rule, Step(reply="Noted, I will stick to that for the whole trip."), tag="constraint")
    c = b.call("get_order", order_id=ORDER_ID)
    b.turn(f"First, can you check my order {ORDER_ID}? It's the rain jacket and the travel adapter.",
           Step((c,), (json.dumps({"order_id": ORDER_ID, "status": "processing", "items": [
               {"sku": "RJ-2209", "name": "Packable rain jacket", "qty": 1, "price_usd": 89.0},
               {"sku": "TA-0451", "name": "EU travel adapter", "qty": 2, "price_usd": 12.5}],
               "total_usd": 114.0, "ship_to": "221B Baker Street, London NW1 6XE",
               "placed": "2026-05-20"}),)),
           Step(reply=f"Order {ORDER_ID} is processing: a rain jacket and two adapters, $114.00 total, "
                      "currently set to ship to London."),
           tag="order")
    c = b.call("update_address", order_id=ORDER_ID, address=FIRST_ADDRESS)
    b.turn(f"Please ship it to my Lisbon flat instead: {FIRST_ADDRESS}.",
           Step((c,), (json.dumps({"order_id": ORDER_ID, "ship_to": FIRST_ADDRESS, "ok": True}),)),
           Step(reply=f"Done: {ORDER_ID} will now ship to {FIRST_ADDRESS}."), tag="address")
    c = b.call("track_shipment", order_id=ORDER_ID)
    b.turn("And the tracking number?",
           Step((c,), (json.dumps({"order_id": ORDER_ID, "carrier": "UPS", "tracking": TRACKING,
                                   "eta": "2026-06-03",
                                   "events": [{"at": "2026-05-21T10:02", "where": "London", "what": "label created"}]}),)),
           Step(reply=f"UPS tracking number {TRACKING}, expected on 2026-06-03."), tag="order")

    correction_at = turns // 2
    booking_at = turns // 3
    late = turns - 12
    n = len(b.turns)
    while n < turns:
        n = len(b.turns) + 1
        if n == booking_at:
            c1 = b.call("search_hotels", area="Chiado", max_price_usd=180)
            c2 = b.call("book_hotel", hotel_id="HTL-4821", check_in="2026-06-10", nights=5, email="maya.chen@example.com")
            b.turn("Let's book the Chiado hotel we liked, five nights from June 10.",
                   Step((c1,), (b.hotels("Chiado"),)),
                   Step((c2,), (json.dumps({"booking_ref": BOOKING, "hotel_id": "HTL-4821", "price_per_night_usd": 165,
                                            "confirmation_sent_to": "maya.chen@example.com"}),)),
                   Step(reply=f"Booked: reference {BOOKING}, $165 per night, confirmation sent to maya.chen@example.com."),
                   tag="booking")
            continue
        if n == correction_at:
            c = b.call("update_address", order_id=ORDER_ID, address=CORRECTED_ADDRESS)
            b.turn(f"Oh no, the address was wrong. Use {CORRECTED_ADDRESS} instead for {ORDER_ID}.",
                   Step((c,), (json.dumps({"order_id": ORDER_ID, "ship_to": CORRECTED_ADDRESS, "ok": True}),)),
                   Step(reply=f"Corrected: {ORDER_ID} now ships to {CORRECTED_ADDRESS}."), tag="correction")
            continue
        if n == late:
            c = b.call("get_order", order_id=ORDER_ID)
            b.turn("Remind me, where is my order from the beginning going to be delivered, and what was its tracking number?",
                   Step((c,), (json.dumps({"order_id": ORDER_ID, "status": "in transit", "ship_to": CORRECTED_ADDRESS,
                                           "tracking": TRACKING}),)),
                   Step(reply=f"{ORDER_ID} is in transit to {CORRECTED_ADDRESS}; UPS tracking {TRACKING}."), tag="recall")
            continue
        if n == late - 6:
            c = b.call("retrieve", query="tracking number of my first order", top_k=5, since=None, until=None,
                       kind=None, page=None)
            b.turn("I lost the shipping email. What was the tracking number of my first order?",
                   Step((c,), ()),  # a memory tool: memos itself answers it during the replay
                   Step(reply=f"Found it in my notes: the tracking number is {TRACKING}."), tag="retrieve")
            continue
        if n == late + 3:
            b.turn("What's my hotel booking reference again?",
                   Step(reply=f"Your Chiado hotel booking reference is {BOOKING}."), tag="recall")
            continue
        kind = rng.random()
        if kind < 0.35:
            area, cuisine = rng.choice(_NEIGHBOURHOODS), rng.choice(_CUISINES)
            c = b.call("search_restaurants", area=area, cuisine=cuisine, exclude_spicy=True)
            b.turn(f"Can you find a {cuisine} place for dinner in {area}?",
                   Step((c,), (b.restaurants(area, cuisine),)),
                   Step(reply=f"Here are a few {cuisine} options in {area}; I left out anything spicy."))
        elif kind < 0.5:
            day = rng.randint(8, 16)
            c1 = b.call("get_weather", city="Lisbon", date=f"2026-06-{day:02d}")
            c2 = b.call("search_restaurants", area=rng.choice(_NEIGHBOURHOODS), cuisine="seafood", exclude_spicy=True)
            b.turn(f"What's the weather on June {day}, and is there a seafood lunch spot near the river?",
                   Step((c1, c2), (b.weather(day), b.restaurants("Cais do Sodré", "seafood"))),
                   Step(reply=f"June {day} looks fine for the river; here are seafood places that open after 9am."))
        elif kind < 0.62:
            area = rng.choice(_NEIGHBOURHOODS)
            c = b.call("search_hotels", area=area, max_price_usd=180)
            b.turn(f"Show me hotels in {area} within my budget.",
                   Step((c,), (b.hotels(area),)),
                   Step(reply=f"These {area} hotels are at or under $180 per night."))
        elif kind < 0.8:
            sight = rng.choice(_SIGHTS)
            b.turn(f"Tell me about {sight}. Is it worth it, and what time does it open?",
                   Step(reply=f"{sight} is worth a visit; it opens at 10:00, so it fits your no-early-starts rule. "
                              f"Plan about two hours and buy tickets online to skip the queue."))
        elif kind < 0.9:
            dish = rng.choice(_DISHES)
            b.turn(f"What is {dish}?",
                   Step(reply=f"{dish.capitalize()} is a Lisbon classic. " +
                        ("It is spicy, so I will not recommend it to you." if dish == "piri-piri chicken"
                         else "It is not spicy, so it is safe for you.")))
        else:
            b.turn(rng.choice(_SMALL_TALK), Step(reply="You're welcome!"))
    return b.turns[:turns]
