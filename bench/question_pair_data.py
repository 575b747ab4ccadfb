"""The vocabulary of bench/question_pairs.py: question intents, their wordings and slot fillers.

An intent is one question a user might send a chat API ("the capital of {country}"). Its
templates are different wordings of that one question: any two, filled with the same slot
values, mean the same. A slot's kind names the near-miss that changing its value makes
("entities": France/Spain). `roles` names two slots drawing on one pool whose values, swapped,
change the answer (from Paris to London / from London to Paris).

Written from language knowledge alone: no model, cache or verifier has scored any of it.
Values of a binary slot (negation, antonyms, scope) that add a phrase start with a space, and
the empty value leaves it out; templates put such a slot straight after the previous word.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    name: str
    kind: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Intent:
    name: str
    templates: tuple[str, ...]
    slots: tuple[Slot, ...]
    roles: tuple[str, str] | None = None


def slot(name: str, kind: str, listed: str) -> Slot:
    """A slot whose values are listed in one string, separated by " / "."""
    return Slot(name, kind, tuple(listed.split(" / ")))


def toggle(name: str, kind: str, one: str, other: str) -> Slot:
    """A slot of two values, such as "" and " for a child" (added or left out)."""
    return Slot(name, kind, (one, other))


LANGUAGES = "Python / Java / Go / Rust / C++ / JavaScript / Ruby / C#"

INTENTS: tuple[Intent, ...] = (
    # ---- the dev half (question_pairs.DEV_INTENTS) ----
    Intent(
        "capital_city",
        (
            "What is the capital of {country}?",
            "Which city is the capital of {country}?",
            "tell me the capital city of {country}",
            "What's {country}'s capital?",
            "Could you tell me what the capital of {country} is?",
            "{country}: which city is its capital?",
        ),
        (
            slot(
                "country",
                "entities",
                "France / Spain / Australia / Canada / Brazil / Turkey / Nigeria / Kazakhstan / "
                "New Zealand / Switzerland / Vietnam / Morocco",
            ),
        ),
    ),
    Intent(
        "length_conversion",
        (
            "How many {target} are in {amount} {source}?",
            "Convert {amount} {source} to {target}.",
            "What is {amount} {source} in {target}?",
            "{amount} {source} is how many {target}?",
            "could you convert {amount} {source} into {target} for me",
        ),
        (
            slot("amount", "numbers", "3 / 5 / 12 / 26.2 / 100 / 250"),
            slot(
                "source",
                "nouns",
                "miles / kilometres / feet / metres / inches / centimetres / yards",
            ),
            slot(
                "target",
                "nouns",
                "miles / kilometres / feet / metres / inches / centimetres / yards",
            ),
        ),
        roles=("source", "target"),
    ),
    Intent(
        "recipe_substitution",
        (
            "What can I use instead of {ingredient} in {dish}{diet}?",
            "What's a good substitute for {ingredient} when making {dish}{diet}?",
            "I've run out of {ingredient}. What else can I use in {dish}{diet}?",
            "{ingredient} substitute for {dish}{diet}?",
            "Is there something I can swap in for {ingredient} in {dish}{diet}?",
        ),
        (
            slot(
                "ingredient",
                "nouns",
                "butter / eggs / buttermilk / sour cream / heavy cream / honey / milk",
            ),
            slot(
                "dish",
                "nouns",
                "pancakes / banana bread / brownies / chocolate chip cookies / cornbread / muffins",
            ),
            toggle("diet", "scope", "", " for a vegan version"),
        ),
    ),
    Intent(
        "subscription_change",
        (
            "How do I {action} my {service} subscription?",
            "What are the steps to {action} a subscription to {service}?",
            "I want to {action} my {service} membership, how can I do that?",
            "Can you walk me through how to {action} my {service} plan?",
            "how to {action} {service} subscription",
        ),
        (
            toggle("action", "antonyms", "cancel", "renew"),
            slot(
                "service",
                "entities",
                "Netflix / Spotify / Disney+ / Amazon Prime / YouTube Premium / Hulu / Audible / "
                "Adobe Creative Cloud",
            ),
        ),
    ),
    Intent(
        "language_speed",
        (
            "Is {first} {comparison} than {second} for {task}?",
            "For {task}, is {first} {comparison} than {second}?",
            "Would {first} be {comparison} than {second} when it comes to {task}?",
            "Does {first} run {comparison} than {second} for {task}?",
            "When building {task}, is {first} generally {comparison} than {second}?",
        ),
        (
            slot("first", "entities", LANGUAGES),
            slot("second", "entities", LANGUAGES),
            toggle("comparison", "antonyms", "faster", "slower"),
            slot(
                "task",
                "nouns",
                "web servers / data pipelines / games / command-line tools / "
                "machine learning models / mobile apps",
            ),
        ),
        roles=("first", "second"),
    ),
    Intent(
        "cheapest_flight",
        (
            "What's the cheapest flight from {origin} to {destination} on {day}?",
            "Find me the cheapest flight from {origin} to {destination} for {day}.",
            "I need to fly from {origin} to {destination} on {day}. What's the cheapest option?",
            "cheapest flight {origin} to {destination} on {day}",
            "Which flight from {origin} to {destination} on {day} costs the least?",
        ),
        (
            slot(
                "origin",
                "entities",
                "Paris / London / Madrid / Rome / Lisbon / Dublin / Vienna / Athens",
            ),
            slot(
                "destination",
                "entities",
                "Paris / London / Madrid / Rome / Lisbon / Dublin / Vienna / Athens",
            ),
            slot(
                "day",
                "dates",
                "Monday / Tuesday / Wednesday / Thursday / Friday / Saturday / Sunday",
            ),
        ),
        roles=("origin", "destination"),
    ),
    Intent(
        "tablets_per_day",
        (
            "How many {strength} mg {drug} tablets can I take in one day{patient}?",
            "What's the daily limit for {strength} mg tablets of {drug}{patient}?",
            "Max number of {strength}mg {drug} pills per day{patient}?",
            "How many {drug} tablets of {strength} mg are safe to take in 24 hours{patient}?",
            "Could you tell me how many {strength} mg {drug} tablets are safe in a day{patient}?",
        ),
        (
            slot("strength", "numbers", "200 / 250 / 400 / 500"),
            slot("drug", "nouns", "ibuprofen / paracetamol / aspirin / naproxen / mefenamic acid"),
            toggle("patient", "scope", "", " for a child"),
        ),
    ),
    Intent(
        "time_zone",
        (
            "If it's {hour} in {home}, what time is it in {away}?",
            "What time is it in {away} when it is {hour} in {home}?",
            "When it's {hour} in {home}, what's the time in {away}?",
            "{hour} in {home} is what time in {away}?",
            "Convert {hour} {home} time to {away} time.",
        ),
        (
            slot("hour", "numbers", "7 am / 10 am / 2 pm / 6 pm / 11 pm"),
            slot(
                "home",
                "entities",
                "London / Tokyo / New York / Sydney / Berlin / Los Angeles / Singapore / Mumbai",
            ),
            slot(
                "away",
                "entities",
                "London / Tokyo / New York / Sydney / Berlin / Los Angeles / Singapore / Mumbai",
            ),
        ),
        roles=("home", "away"),
    ),
    Intent(
        "translate_word",
        (
            'How do you say "{word}" in {language}?',
            'What is the {language} word for "{word}"?',
            'Translate "{word}" into {language}.',
            'what\'s "{word}" in {language}',
            'Can you tell me the {language} translation of "{word}"?',
        ),
        (
            slot(
                "word",
                "nouns",
                "library / butterfly / cheese / umbrella / window / apple / bicycle / kitchen",
            ),
            slot(
                "language",
                "entities",
                "French / German / Spanish / Italian / Japanese / Portuguese / Dutch / Korean",
            ),
        ),
    ),
    Intent(
        "debug_error",
        (
            "How do I fix {error} in {language}?",
            "My {language} program keeps hitting {error}. How can I fix it?",
            "How can I resolve {error} in {language}?",
            "getting {error} in {language}, how to resolve",
            "Could you help me fix {error} in my {language} code?",
        ),
        (
            slot(
                "error",
                "nouns",
                "a segmentation fault / a null pointer exception / a stack overflow / "
                "an index out of range error / a memory leak / a deadlock / a race condition",
            ),
            slot("language", "entities", LANGUAGES),
        ),
    ),
    Intent(
        "tax_deadline",
        (
            "When is the {tax} filing deadline in {country} for the {year} tax year{filer}?",
            "What's the last day to file {tax} in {country} for the {year} tax year{filer}?",
            "By what date do I have to file my {year} {tax} return in {country}{filer}?",
            "{year} {tax} filing deadline in {country}{filer}?",
            "Tell me the due date for {year} {tax} returns in {country}{filer}.",
        ),
        (
            slot("tax", "nouns", "income tax / capital gains tax"),
            slot(
                "country",
                "entities",
                "the US / the UK / Canada / Australia / Ireland / New Zealand",
            ),
            slot("year", "dates", "2021 / 2022 / 2023 / 2024 / 2025"),
            toggle("filer", "scope", "", " if I'm self-employed"),
        ),
    ),
    Intent(
        "password_reset",
        (
            "How do I reset my {service} password{condition}?",
            "I forgot my {service} password. How can I reset it{condition}?",
            "What are the steps to recover my {service} password{condition}?",
            "how to change a forgotten {service} password{condition}",
            "Can you explain how to reset the password on my {service} account{condition}?",
        ),
        (
            slot(
                "service",
                "entities",
                "Gmail / Outlook / Instagram / Facebook / Apple ID / LinkedIn / PayPal / Steam",
            ),
            toggle("condition", "negation", "", " without access to my recovery email"),
        ),
    ),
    Intent(
        "month_to_visit",
        (
            "What's the {quality} month to visit {place}{budget}?",
            "Which month is the {quality} time to travel to {place}{budget}?",
            "{quality} month for a trip to {place}{budget}?",
            "If I want to visit {place}{budget}, which month is {quality}?",
            "Which month of the year is the {quality} one for going to {place}{budget}?",
        ),
        (
            toggle("quality", "antonyms", "best", "worst"),
            slot(
                "place",
                "entities",
                "Japan / Iceland / Peru / Thailand / Morocco / New Zealand / Portugal / Kenya",
            ),
            toggle("budget", "scope", "", " on a tight budget"),
        ),
    ),
    Intent(
        "roasting_time",
        (
            "How long should I roast a {weight} kg {meat} at {temp}°C?",
            "What's the cooking time for a {weight} kg {meat} in an oven at {temp}°C?",
            "At {temp}°C, how long does a {weight} kg {meat} take to roast?",
            "roasting time for a {weight} kg {meat} at {temp} degrees Celsius",
            "For how long do I roast a {weight}kg {meat} at {temp}°C?",
        ),
        (
            slot("weight", "numbers", "1.5 / 2 / 2.5 / 3 / 4"),
            slot(
                "meat",
                "nouns",
                "chicken / turkey / leg of lamb / pork shoulder / beef brisket / duck",
            ),
            slot("temp", "numbers", "160 / 180 / 200 / 220"),
        ),
    ),
    Intent(
        "city_population",
        (
            "What was the population of {city}{area} in {year}?",
            "How many people lived in {city}{area} in {year}?",
            "In {year}, what was the population of {city}{area}?",
            "population of {city}{area} as of {year}",
            "Could you tell me the number of people living in {city}{area} in {year}?",
        ),
        (
            slot(
                "city",
                "entities",
                "Tokyo / Lagos / Mexico City / Istanbul / Cairo / Jakarta / Chicago / Manila",
            ),
            toggle("area", "scope", "", " including its metropolitan area"),
            slot("year", "dates", "1950 / 1980 / 2000 / 2010 / 2020"),
        ),
    ),
    Intent(
        "install_software",
        (
            "How do I install {software} on {os}{rights}?",
            "What are the steps to set up {software} on {os}{rights}?",
            "Can I install {software} on {os}{rights}, and how?",
            "installing {software} on {os}{rights}",
            "Walk me through installing {software} on my {os} computer{rights}.",
        ),
        (
            slot(
                "software",
                "entities",
                "Python / Docker / Node.js / Visual Studio Code / Git / PostgreSQL / Java",
            ),
            slot("os", "entities", "Windows 11 / macOS / Ubuntu / Fedora"),
            toggle("rights", "negation", "", " without admin rights"),
        ),
    ),
    Intent(
        "sort_collection",
        (
            "How do I sort {collection} in {order} order in {language}{copy}?",
            "In {language}, how can I sort {collection} in {order} order{copy}?",
            "What's the way to sort {collection} {order} in {language}{copy}?",
            "{language}: sort {collection} in {order} order{copy}",
            "Show me how to put {collection} in {order} order using {language}{copy}.",
        ),
        (
            slot(
                "collection",
                "nouns",
                "a list of numbers / an array of strings / a list of dates / "
                "the keys of a dictionary",
            ),
            toggle("order", "antonyms", "ascending", "descending"),
            slot("language", "entities", "Python / Java / JavaScript / Go / Rust / C#"),
            toggle("copy", "negation", "", " without changing the original"),
        ),
    ),
    Intent(
        "visa_for_trip",
        (
            "Do I need a visa to go to {destination} {purpose} with {passport} passport?",
            "As someone holding {passport} passport, do I need a visa to enter {destination} "
            "{purpose}?",
            "Is a visa required to enter {destination} {purpose} on {passport} passport?",
            "Will I need a visa to travel to {destination} {purpose} if I'm travelling on "
            "{passport} passport?",
            "do i need a visa for {destination} {purpose}, travelling on {passport} passport",
        ),
        (
            slot(
                "destination",
                "entities",
                "Japan / China / Turkey / Egypt / Vietnam / Russia / Indonesia / Kenya",
            ),
            slot("purpose", "nouns", "as a tourist / as a student / on a business trip"),
            slot(
                "passport",
                "entities",
                "a British / an Indian / a Brazilian / an Australian / a Nigerian / a Canadian / "
                "a Mexican / a South African",
            ),
        ),
    ),
    Intent(
        "weekday_of_date",
        (
            "What day of the week is {month} {day}, {year}?",
            "Which weekday does {month} {day}, {year} fall on?",
            "On what day of the week does {day} {month} {year} fall?",
            "{month} {day} {year}: which day of the week is that?",
            "tell me the weekday for {day} {month} {year}",
        ),
        (
            slot("month", "dates", "January / April / July / October / December"),
            slot("day", "dates", "3 / 9 / 14 / 21 / 28"),
            slot("year", "dates", "1969 / 1999 / 2010 / 2025 / 2031"),
        ),
    ),
    Intent(
        "pet_food_safety",
        (
            "Is it safe for {pet} to eat {prep} {food}?",
            "Can {pet} eat {prep} {food}?",
            "Would it be safe to feed {pet} {prep} {food}?",
            "Is it OK to give {pet} {prep} {food}?",
            "can i give {prep} {food} to {pet}",
        ),
        (
            slot("pet", "nouns", "dogs / cats / rabbits / hamsters / ferrets"),
            toggle("prep", "antonyms", "raw", "cooked"),
            slot("food", "nouns", "eggs / salmon / chicken bones / potatoes / pork / shrimp"),
        ),
    ),
    # ---- the held-out half (question_pairs.HELD_OUT_INTENTS) ----
    Intent(
        "superlative_place",
        (
            "What is the {size} {thing}{region}?",
            "Which {thing} is the {size}{region}?",
            "Name the {size} {thing}{region}.",
            "{size} {thing}{region}?",
            "Do you know which {thing} is the {size} one{region}?",
        ),
        (
            toggle("size", "antonyms", "largest", "smallest"),
            slot("thing", "nouns", "country / landlocked country / capital city / island nation"),
            toggle("region", "scope", " in Africa", " in the world"),
        ),
    ),
    Intent(
        "currency_conversion",
        (
            "How much is {amount} {source} in {target}?",
            "Please convert {amount} {source} into {target}.",
            "What's {amount} {source} worth in {target}?",
            "{amount} {source} to {target}?",
            "If I exchange {amount} {source}, how many {target} do I get?",
        ),
        (
            slot("amount", "numbers", "20 / 50 / 100 / 250 / 1,000 / 20,000"),
            slot("source", "entities", "USD / EUR / GBP / JPY / CHF / INR / CAD"),
            slot("target", "entities", "USD / EUR / GBP / JPY / CHF / INR / CAD"),
        ),
        roles=("source", "target"),
    ),
    Intent(
        "drug_with_food",
        (
            "Can I take {drug} {meal}?",
            "Is it OK to take {drug} {meal}?",
            "Is it safe to take {drug} {meal}?",
            "{drug} {meal}: is that okay?",
            "Am I allowed to take my {drug} {meal}?",
            "can you take {drug} {meal}",
        ),
        (
            slot(
                "drug",
                "nouns",
                "ibuprofen / metformin / amoxicillin / levothyroxine / omeprazole / "
                "iron tablets / prednisone",
            ),
            toggle("meal", "negation", "with food", "without food"),
        ),
    ),
    Intent(
        "visa_free_countries",
        (
            "Which countries{region} {require} a visa for {passport} passport holders?",
            "List the countries{region} that {require} a visa for people with {passport} "
            "passports.",
            "For {passport} citizens, which countries{region} {require} a visa?",
            "What countries{region} {require} a visa if I hold {passport} citizenship?",
            "{passport} passport holders: which countries{region} {require} a visa?",
        ),
        (
            slot(
                "passport",
                "entities",
                "British / Indian / Brazilian / Nigerian / Canadian / Japanese / Mexican / Turkish",
            ),
            toggle("require", "negation", "require", "don't require"),
            toggle("region", "scope", "", " in Europe"),
        ),
    ),
    Intent(
        "recipe_without",
        (
            "How do I make {dish} {inclusion} {ingredient}?",
            "What's a good recipe for {dish} {inclusion} {ingredient}?",
            "Can you give me a recipe for {dish} {inclusion} {ingredient}?",
            "I want to make {dish} {inclusion} {ingredient}, how do I do it?",
            "recipe for {dish} {inclusion} {ingredient}",
        ),
        (
            slot(
                "dish",
                "nouns",
                "pancakes / brownies / pizza dough / a sponge cake / shortbread / waffles",
            ),
            toggle("inclusion", "negation", "with", "without"),
            slot("ingredient", "nouns", "eggs / butter / milk / sugar / baking soda"),
        ),
    ),
    Intent(
        "train_times",
        (
            "What time is the {which} train from {origin} to {destination} on {day}?",
            "When does the {which} train from {origin} to {destination} leave on {day}?",
            "On {day}, what time does the {which} train from {origin} to {destination} depart?",
            "{which} train from {origin} to {destination} on {day}?",
            "Can you tell me when the {which} train from {origin} to {destination} departs on "
            "{day}?",
        ),
        (
            toggle("which", "antonyms", "first", "last"),
            slot(
                "origin",
                "entities",
                "Manchester / Edinburgh / Brussels / Amsterdam / Cologne / Lyon / Zurich / Milan",
            ),
            slot(
                "destination",
                "entities",
                "Manchester / Edinburgh / Brussels / Amsterdam / Cologne / Lyon / Zurich / Milan",
            ),
            slot(
                "day",
                "dates",
                "Monday / Tuesday / Wednesday / Thursday / Friday / Saturday / Sunday",
            ),
        ),
        roles=("origin", "destination"),
    ),
    Intent(
        "legal_age",
        (
            "What is the minimum legal age for {activity} in {country}?",
            "How old do you have to be in {country} before {activity} is legal?",
            "At what age is {activity} allowed in {country}?",
            "In {country}, what's the legal age for {activity}?",
            "legal age for {activity} in {country}",
            "Could you tell me the youngest age at which {activity} is permitted in {country}?",
        ),
        (
            slot(
                "activity",
                "nouns",
                "drinking alcohol / driving a car / voting / getting married / buying tobacco",
            ),
            slot(
                "country",
                "entities",
                "Japan / Germany / Brazil / India / South Korea / the United States / Italy / "
                "Canada",
            ),
        ),
    ),
    Intent(
        "toggle_setting",
        (
            "How do I turn {state} {setting} in {app}?",
            "How can I switch {state} {setting} in {app}?",
            "Where is the option to turn {setting} {state} in {app}?",
            "What are the steps to turn {state} {setting} on {app}?",
            "{app}: how to turn {setting} {state}?",
            "I'd like to turn {state} {setting} in {app}. How?",
        ),
        (
            toggle("state", "antonyms", "on", "off"),
            slot(
                "setting",
                "nouns",
                "dark mode / notifications / two-factor authentication / autoplay / "
                "location sharing / read receipts",
            ),
            slot(
                "app",
                "entities",
                "WhatsApp / Instagram / YouTube / Slack / Gmail / Spotify / Microsoft Teams",
            ),
        ),
    ),
    Intent(
        "type_conversion",
        (
            "How do I convert {source} to {target} in {language}?",
            "In {language}, how can I turn {source} into {target}?",
            "What's the best way to convert {source} to {target} in {language}?",
            "{language}: converting {source} to {target}?",
            "How would I change {source} into {target} using {language}?",
            "convert {source} to {target} {language}",
        ),
        (
            slot(
                "source",
                "nouns",
                "a string / an integer / a float / a boolean / a byte array",
            ),
            slot(
                "target",
                "nouns",
                "a string / an integer / a float / a boolean / a byte array",
            ),
            slot(
                "language",
                "entities",
                "Python / Java / JavaScript / Go / Rust / C# / Kotlin / Swift",
            ),
        ),
        roles=("source", "target"),
    ),
    Intent(
        "public_holidays",
        (
            "What public holidays does {country} have in {month} {year}?",
            "Which public holidays fall in {month} {year} in {country}?",
            "Are there any public holidays in {country} during {month} {year}?",
            "List the public holidays in {country} in {month} {year}.",
            "{month} {year} public holidays in {country}?",
            "Tell me which days in {month} {year} are public holidays in {country}.",
        ),
        (
            slot(
                "country",
                "entities",
                "Germany / Japan / Canada / India / France / Brazil / Mexico / the UK",
            ),
            slot("month", "dates", "January / March / May / August / November / December"),
            slot("year", "dates", "2024 / 2025 / 2026 / 2027"),
        ),
    ),
    Intent(
        "calories_burned",
        (
            "How many calories does {minutes} minutes of {activity} burn?",
            "How many calories do I burn {activity} for {minutes} minutes?",
            "Calories burned by {minutes} minutes of {activity}?",
            "If I spend {minutes} minutes {activity}, how many calories will I burn?",
            "What's the calorie burn for {minutes} minutes of {activity}?",
        ),
        (
            slot("minutes", "numbers", "15 / 20 / 30 / 45 / 60 / 90"),
            slot(
                "activity",
                "nouns",
                "running / swimming / cycling / rowing / jumping rope / walking / hiking",
            ),
        ),
    ),
    Intent(
        "mortgage_payment",
        (
            "What would my monthly payment be on a {amount} mortgage at {rate}% over {term} years?",
            "Monthly repayment for a {amount} home loan at {rate}% interest over {term} years?",
            "If I take a {amount} mortgage for {term} years at {rate}% interest, how much will I "
            "pay each month?",
            "Calculate the monthly payment for a {term}-year mortgage of {amount} at {rate}%.",
            "How much would I pay per month on a {amount} mortgage with a {rate}% rate and a "
            "{term}-year term?",
        ),
        (
            slot("amount", "numbers", "$200,000 / $350,000 / $500,000 / $750,000"),
            slot("rate", "numbers", "3.5 / 4 / 5.25 / 6 / 7"),
            slot("term", "numbers", "15 / 20 / 25 / 30"),
        ),
    ),
    Intent(
        "watering_plants",
        (
            "How often should I water {plant}{location} in {season}?",
            "In {season}, how often does {plant}{location} need watering?",
            "How frequently do you water {plant}{location} during {season}?",
            "{season} watering schedule for {plant}{location}?",
            "How many times a week should {plant}{location} be watered in {season}?",
        ),
        (
            slot(
                "plant",
                "nouns",
                "a cactus / an orchid / a snake plant / a peace lily / a tomato plant / "
                "a fiddle leaf fig / a basil plant",
            ),
            toggle("location", "scope", "", " kept indoors"),
            toggle("season", "antonyms", "summer", "winter"),
        ),
    ),
    Intent(
        "cooking_measures",
        (
            "How many {target} is {amount} {source} of {ingredient}?",
            "Convert {amount} {source} of {ingredient} to {target}.",
            "{amount} {source} of {ingredient} in {target}?",
            "What does {amount} {source} of {ingredient} come to in {target}?",
            "I have {amount} {source} of {ingredient}; how many {target} is that?",
        ),
        (
            slot("amount", "numbers", "2 / 3 / 5 / 12"),
            slot("source", "nouns", "cups / grams / ounces / tablespoons"),
            slot("target", "nouns", "cups / grams / ounces / tablespoons"),
            slot("ingredient", "nouns", "flour / sugar / butter / rice / honey / oats"),
        ),
        roles=("source", "target"),
    ),
    Intent(
        "food_around_run",
        (
            "What should I eat {timing} a {distance} km run?",
            "What's a good meal {timing} running {distance} km?",
            "Which foods are best to eat {timing} a {distance}-kilometre run?",
            "{timing} a {distance} km run, what should I be eating?",
            "What food should I have {timing} running {distance} kilometres?",
        ),
        (
            toggle("timing", "antonyms", "before", "after"),
            slot("distance", "numbers", "5 / 10 / 21 / 42"),
        ),
    ),
    Intent(
        "cup_final_result",
        (
            "Who {result} the {event} final in {year}?",
            "Which team {result} the {year} {event} final?",
            "In {year}, who {result} the {event} final?",
            "{event} final {year}: who {result}?",
            "Tell me which side {result} the {event} final back in {year}.",
        ),
        (
            toggle("result", "antonyms", "won", "lost"),
            slot(
                "event",
                "entities",
                "Champions League / FA Cup / Stanley Cup / Copa del Rey / Europa League / "
                "DFB-Pokal",
            ),
            slot("year", "dates", "2005 / 2008 / 2011 / 2014 / 2017 / 2019"),
        ),
    ),
    Intent(
        "packing_list",
        (
            "What should I pack for a {days}-day trip to {place}{company}?",
            "Can you give me a packing list for {days} days in {place}{company}?",
            "I'm going to {place} for {days} days{company}. What should I bring?",
            "packing list for {place}, {days} days{company}",
            "What do I need to take on a {days}-day holiday in {place}{company}?",
        ),
        (
            slot("days", "numbers", "3 / 5 / 7 / 10 / 14"),
            slot(
                "place",
                "entities",
                "Iceland / Bali / Scotland / Morocco / Costa Rica / Norway / Vietnam / Egypt",
            ),
            toggle("company", "scope", "", " with a toddler"),
        ),
    ),
    Intent(
        "daily_nutrient",
        (
            "How much {nutrient} does a {age}-year-old {person} need each day?",
            "What's the recommended daily {nutrient} intake for a {age}-year-old {person}?",
            "Daily {nutrient} requirement for a {age} year old {person}?",
            "How much {nutrient} should a {person} aged {age} get per day?",
            "For a {age}-year-old {person}, how much {nutrient} is recommended daily?",
        ),
        (
            slot("nutrient", "nouns", "protein / iron / calcium / vitamin D / fibre"),
            slot("age", "numbers", "15 / 30 / 60 / 75"),
            slot("person", "nouns", "male / female"),
        ),
    ),
    Intent(
        "package_version",
        (
            "How do I {action} version {version} of a package with {tool}{scope}?",
            "What's the {tool} command to {action} a package at version {version}{scope}?",
            "Using {tool}, how can I {action} version {version} of a package{scope}?",
            "{tool}: {action} package version {version}{scope}?",
            "how to {action} v{version} of a package via {tool}{scope}",
        ),
        (
            toggle("action", "antonyms", "install", "uninstall"),
            slot("version", "numbers", "1.2 / 2.0 / 3.4.1 / 0.9 / 5.1"),
            slot("tool", "entities", "pip / npm / Homebrew / cargo / conda / gem"),
            toggle("scope", "scope", "", " for the current user only"),
        ),
    ),
    Intent(
        "word_relation",
        (
            'What is {relation} for "{word}"{register}?',
            'Give me {relation} of the word "{word}"{register}.',
            'Can you suggest {relation} for "{word}"{register}?',
            '"{word}": what\'s {relation}{register}?',
            'I need {relation} for the word "{word}"{register}.',
        ),
        (
            toggle("relation", "antonyms", "a synonym", "an antonym"),
            slot(
                "word",
                "nouns",
                "house / joy / anger / journey / mistake / friend / beginning / danger",
            ),
            toggle("register", "scope", "", " that sounds more formal"),
        ),
    ),
)
