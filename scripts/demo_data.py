"""Synthetic (text, gold value) pairs for the demo model's four sample schemas.

Every generator takes a `random.Random` and returns the input text and the value that
belongs under the schema's root id. Run as a script to write held-out JSONL sets (another
seed than training's, and no text that the training set holds verbatim):

    python scripts/demo_data.py --seed 20250101 --count 50 --out samples
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import demo_words as w  # noqa: E402

Sample = tuple[str, Any]
ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = {
    "person": "schemas/person.yaml",
    "weather": "schemas/weather.json",
    "receipt": "schemas/receipt.yaml",
    "review": "schemas/restaurant_review.yaml",
}


def invented_name(rng: random.Random) -> str:
    """A made-up two-part name from syllables (e.g. 'Kalo Vemir')."""
    parts = []
    for _ in range(2):
        word = "".join(rng.choice(w.NAME_SYLLABLES) for _ in range(rng.randint(2, 3)))
        parts.append(word.capitalize())
    return " ".join(parts)


def person_name(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.3:
        return invented_name(rng)
    name = f"{rng.choice(w.FIRST_NAMES)} {rng.choice(w.LAST_NAMES)}"
    if roll > 0.93:
        name = f"{rng.choice(w.FIRST_NAMES)} {name}"
    return name


def person(rng: random.Random) -> Sample:
    """A person with name, age and city, in English (mostly) or Chinese."""
    age = rng.randint(1, 99) if rng.random() < 0.2 else rng.randint(18, 80)
    if rng.random() < 0.2:
        name = rng.choice(w.ZH_SURNAMES) + "".join(
            rng.choice(w.ZH_GIVEN) for _ in range(rng.randint(1, 2))
        )
        city = rng.choice(w.ZH_CITIES)
        text = rng.choice(w.PERSON_TEMPLATES_ZH).format(
            name=name, age=age, city=city, job=rng.choice(w.ZH_JOBS)
        )
        return text, {"name": name, "age": age, "city": city}
    name, city = person_name(rng), rng.choice(w.CITIES)
    other = rng.choice([c for c in w.CITIES if c != city])
    text = rng.choice(w.PERSON_TEMPLATES).format(
        name=name, age=age, city=city, other_city=other, year=rng.randint(1990, 2024),
        job=rng.choice(w.JOBS), business=rng.choice(w.BUSINESSES),
    )  # fmt: skip
    return text, {"name": name, "age": age, "city": city}


def weather_places() -> list[tuple[str, str, str]]:
    """(city as asked, location for the tool, unit of the place)."""
    places = [(c, f"{c}, {s}", "fahrenheit") for c, s in (e.split(":") for e in w.WEATHER_US)]
    places += [(c, f"{c}, {s}", "fahrenheit") for c, s in w.WEATHER_US_TWO_WORDS]
    for entry in w.WEATHER_WORLD:
        city, country = entry.replace("_", " ").split(":")
        places.append((city, f"{city}, {country}", "celsius"))
    return places


PLACES = weather_places()


def weather(rng: random.Random) -> Sample:
    """A request for the current weather (a tool call): location and unit."""
    if rng.random() < 0.12:
        city_zh, city_en = rng.choice(sorted(w.WEATHER_ZH.items()))
        text = rng.choice(w.WEATHER_TEMPLATES_ZH).format(city=city_zh)
        return text, {"location": f"{city_en}, China", "format": "celsius"}
    city, location, unit = rng.choice(PLACES)
    if rng.random() < 0.2:
        unit = rng.choice(["celsius", "fahrenheit"])
        template = rng.choice(w.WEATHER_TEMPLATES_UNIT)
        text = template.format(city=city, unit=rng.choice(w.UNIT_WORDS[unit]))
    else:
        text = rng.choice(w.WEATHER_TEMPLATES).format(city=city)
    text = rng.choice(w.WEATHER_OPENERS) + text + rng.choice(w.WEATHER_CLOSERS)
    return text, {"location": location, "format": unit}


def money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def receipt(rng: random.Random) -> Sample:
    """A shop receipt: merchant, ISO date, currency (or none), total and unit-priced items."""
    merchant = f"{rng.choice(w.SHOP_WORDS_A)} {rng.choice(w.SHOP_WORDS_B)}"
    if rng.random() < 0.7:
        merchant += f" {rng.choice(w.SHOP_KINDS)}"
    date = f"{rng.randint(2019, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    currency: str | None = rng.choice(sorted(w.CURRENCIES))
    if rng.random() < 0.15:
        currency = None
    lines, items, total = [merchant], [], 0
    clock = f"{rng.randint(8, 21)}:{rng.randint(0, 59):02d}"
    till = f"Till {rng.randint(1, 9)}"
    date_line = rng.choice([date, f"Date: {date}", f"{date} {clock}", f"Date: {date}   {till}"])
    lines.append(date_line)
    names = rng.sample(w.ITEMS, rng.randint(1, 4))
    for name in names:
        quantity = 1 if rng.random() < 0.55 else rng.randint(2, 6)
        cents = rng.randint(30, 1500) if rng.random() < 0.8 else rng.randint(1, 20) * 50
        total += quantity * cents
        if quantity == 1:
            line = f"1 x {name}".ljust(18) + money(cents)
        else:
            line = f"{quantity} x {name} @ {money(cents)}".ljust(24) + money(quantity * cents)
        lines.append(line)
        items.append({"name": name, "quantity": quantity, "price": cents / 100})
    if rng.random() < 0.5:
        lines.append("-" * 22)
    symbol = w.CURRENCIES.get(currency or "", "")
    if currency is None:
        total_line = "TOTAL".ljust(18) + money(total)
    elif symbol and rng.random() < 0.4:
        total_line = "TOTAL".ljust(18) + symbol + money(total)
    else:
        total_line = f"TOTAL {currency}".ljust(18) + money(total)
    lines.append(total_line)
    footer = rng.choice(w.RECEIPT_FOOTERS)
    if footer:
        lines.append(footer)
    value = {"merchant": merchant, "date": date, "currency": currency, "total": total / 100,
             "items": items}  # fmt: skip
    return "\n".join(lines), value


def review(rng: random.Random) -> Sample:
    """A Chinese restaurant review with 1–4 aspects, each an exact span of the text."""
    count = rng.choices([1, 2, 3, 4], weights=[2, 4, 3, 1])[0]
    aspects: list[dict[str, str]] = []
    text = rng.choice(w.REVIEW_OPENERS)
    for position in range(count):
        aspect = rng.choice(sorted(w.REVIEW_SUBJECTS))
        subject = rng.choice(w.REVIEW_SUBJECTS[aspect])
        sentiment = rng.choices(["positive", "negative", "neutral"], weights=[5, 4, 2])[0]
        opinion = rng.choice(w.REVIEW_OPINIONS[aspect][sentiment])
        adverb = rng.choice(w.REVIEW_ADVERBS) if position else ""
        reference = f"{subject}{adverb}{opinion}"
        if position:
            text += rng.choice(w.REVIEW_LINKS)
        text += reference
        aspects.append({"aspect": aspect, "sentiment_word": opinion, "sentiment": sentiment,
                        "reference": reference})  # fmt: skip
    return text + rng.choice(w.REVIEW_ENDINGS), aspects


GENERATORS: dict[str, Callable[[random.Random], Sample]] = {
    "person": person, "weather": weather, "receipt": receipt, "review": review,
}  # fmt: skip


def generate_samples(count: int, seed: int) -> dict[str, list[Sample]]:
    """`count` synthetic (text, value) pairs per schema, each from a seed of its own."""
    return {
        key: [generate(random.Random(f"{seed}-{key}-{i}")) for i in range(count)]
        for key, generate in GENERATORS.items()
    }


def write_heldout(out: Path, seed: int, count: int, exclude: dict[str, list[Sample]]) -> list[Path]:
    """Write `heldout_<schema>.jsonl` (id, text, gold) per schema, skipping every text in
    `exclude` (the training set); return the paths."""
    paths = []
    for key, generate in GENERATORS.items():
        rng = random.Random(f"{seed}-{key}")
        seen = {text for text, _ in exclude.get(key, [])}
        path = out / f"heldout_{key}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            number = 0
            while number < count:
                text, gold = generate(rng)
                if text in seen:
                    continue
                seen.add(text)
                number += 1
                row = {"id": f"{key}-{number:03d}", "text": text, "gold": gold}
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20250101, help="held-out seed (not training's)")
    parser.add_argument("--count", type=int, default=50, help="records per schema")
    parser.add_argument("--out", type=Path, default=ROOT / "samples")
    parser.add_argument("--train-seed", type=int, default=1234, help="training set to exclude")
    parser.add_argument("--train-count", type=int, default=8000, help="its records per schema")
    args = parser.parse_args(argv)
    training = generate_samples(args.train_count, args.train_seed)
    for path in write_heldout(args.out, args.seed, args.count, training):
        print(path, file=sys.stderr)


if __name__ == "__main__":
    main()
