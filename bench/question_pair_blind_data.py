"""A fifth, blind held-out group of question intents, for a blind check of the cache.

Written on 2026-12-07 from language knowledge alone. No embedding model, cache or verifier
was run on any of it before it was fixed here, and nothing in it was tuned to any model's
scores. It shares no intent, template or sentence with the other four groups
(bench/question_pair_data.py's two halves, bench/question_pair_training_data.py and
bench/question_pair_fresh_data.py): its topics were chosen away from theirs.
"""

from bench.question_pair_data import Intent, slot, toggle

BLIND_INTENTS: tuple[Intent, ...] = (
    # ---- music ----
    Intent(
        "guitar_chord_fingering",
        (
            "How do I play the {chord} chord on the {instrument}{barre}?",
            "Explain the finger positions for the {chord} chord on the {instrument}{barre}.",
            "{chord} chord {instrument}{barre}",
            "Could you tell me how to finger {chord} on a {instrument}{barre}?",
            "Chords: what's the shape for {chord} on the {instrument}{barre}?",
            "I need to play {chord} on my {instrument}{barre}, where do my fingers go?",
        ),
        (
            slot(
                "chord",
                "entities",
                "G7 / C major / F sharp minor / B flat major / E minor 7 / D sus4 / "
                "A diminished / F major 7",
            ),
            slot("instrument", "nouns", "guitar / ukulele / mandolin / banjo"),
            toggle("barre", "negation", "", " without a barre"),
        ),
    ),
    Intent(
        "song_key_transpose",
        (
            "How do I transpose a song from {source} to {target}{capo}?",
            "Explain how to move a song written in {source} into {target}{capo}.",
            "transpose {source} to {target}{capo}",
            "Could you tell me how to change a song's key from {source} to {target}{capo}?",
            "Music theory: how do I shift a tune from {source} up or down to {target}{capo}?",
            "I need to sing a song in {target} but it's written in {source}, how do I transpose "
            "it{capo}?",
        ),
        (
            slot(
                "source",
                "entities",
                "C major / D major / E flat major / E major / F major / G major / A major / "
                "B flat major",
            ),
            slot(
                "target",
                "entities",
                "C major / D major / E flat major / E major / F major / G major / A major / "
                "B flat major",
            ),
            toggle("capo", "scope", "", " on guitar with a capo"),
        ),
        roles=("source", "target"),
    ),
    # ---- kitchen and laundry ----
    Intent(
        "laundry_wash_temperature",
        (
            "What temperature should I wash {colour} {fabric} at?",
            "Explain which wash temperature is right for {colour} {fabric}.",
            "washing temperature {colour} {fabric}",
            "Could you tell me how hot the wash for {colour} {fabric} should be?",
            "Laundry: what temperature setting do {colour} {fabric} need?",
            "I need to put a load of {colour} {fabric} in the washing machine, what temperature "
            "should I pick?",
        ),
        (
            toggle("colour", "antonyms", "white", "dark"),
            slot(
                "fabric",
                "nouns",
                "cotton towels / bed sheets / cotton T-shirts / socks / tea towels / "
                "denim jeans / cotton underwear",
            ),
        ),
    ),
    Intent(
        "air_fryer_conversion",
        (
            "If a recipe says {minutes} minutes at {temp}°C in a {oven} oven, how should I cook "
            "it in an air fryer?",
            "Explain how to convert {minutes} minutes at {temp}°C in a {oven} oven to an air "
            "fryer time and temperature.",
            "{minutes} min at {temp}C in a {oven} oven to air fryer",
            "Could you tell me the air fryer equivalent of {minutes} minutes in a {oven} oven "
            "at {temp}°C?",
            "Air fryer: what setting and time replace {minutes} minutes at {temp}°C in a {oven} "
            "oven?",
            "I need to cook something that says {temp}°C for {minutes} minutes in a {oven} oven, "
            "but I only have an air fryer, what should I set it to?",
        ),
        (
            slot("minutes", "numbers", "10 / 15 / 20 / 25 / 30 / 40 / 45"),
            slot("temp", "numbers", "160 / 180 / 190 / 200 / 220"),
            toggle("oven", "nouns", "fan", "conventional"),
        ),
    ),
    Intent(
        "kitchenware_appliance_safe",
        (
            "Is it safe to put {item} in the {appliance}?",
            "Explain whether {item} can go in the {appliance}.",
            "{item} in {appliance} safe?",
            "Could you tell me if I can put {item} in the {appliance}?",
            "Kitchen care: will {item} survive going in the {appliance}?",
            "I need to put {item} in the {appliance}, is that OK?",
        ),
        (
            slot(
                "item",
                "nouns",
                "a cast iron pan / a wooden chopping board / a non-stick frying pan / "
                "a stainless steel travel mug / a crystal wine glass / a chef's knife / "
                "a plastic takeaway container / an enamel mug",
            ),
            slot("appliance", "nouns", "dishwasher / microwave"),
        ),
    ),
    # ---- admin, law, shopping ----
    Intent(
        "name_change_documents",
        (
            "How do I change my name on my {document} in {country}{reason}?",
            "Explain the process for updating the name on a {document} in {country}{reason}.",
            "change name on {document} in {country}{reason}",
            "Could you tell me how to get my name changed on my {document} in {country}{reason}?",
            "Paperwork in {country}: how do I update the name on my {document}{reason}?",
            "I need my {document} to show my new name{reason}, how do I do that in {country}?",
        ),
        (
            slot(
                "document",
                "nouns",
                "passport / driving licence / bank account / birth certificate / "
                "voter registration / professional licence",
            ),
            slot(
                "country",
                "entities",
                "the UK / Ireland / Australia / Canada / New Zealand / the US / South Africa",
            ),
            toggle("reason", "scope", "", " after getting married"),
        ),
    ),
    Intent(
        "return_window",
        (
            "How many days do I have to return something I bought {channel} in {country}{fault}?",
            "Explain how long the return period is for goods bought {channel} in {country}{fault}.",
            "returning item bought {channel} in {country}{fault} how many days",
            "Could you tell me the deadline for returning an item bought {channel} in "
            "{country}{fault}?",
            "Consumer rights in {country}: how long can I take to return a purchase made "
            "{channel}{fault}?",
            "I need to send back something I bought {channel} in {country}{fault}, how long "
            "have I got?",
        ),
        (
            toggle("channel", "antonyms", "online", "in a shop"),
            slot(
                "country",
                "entities",
                "Germany / France / Ireland / Australia / Spain / Sweden / Canada / Japan / Italy",
            ),
            toggle("fault", "scope", "", " if it's faulty"),
        ),
    ),
    Intent(
        "driving_licence_exchange",
        (
            "How do I exchange a driving licence from {source} for one issued in {target}{test}?",
            "Explain how someone moving from {source} to {target} can exchange their driving "
            "licence{test}.",
            "exchange driving licence {source} to {target}{test}",
            "Could you tell me how to convert my driving licence from {source} into one from "
            "{target}{test}?",
            "Moving abroad: how do I trade a driving licence from {source} for a licence from "
            "{target}{test}?",
            "I've moved from {source} to {target} and need to exchange my driving "
            "licence{test}, how?",
        ),
        (
            slot(
                "source",
                "entities",
                "Germany / France / Spain / Australia / Canada / Ireland / Italy / Japan / "
                "South Korea",
            ),
            slot(
                "target",
                "entities",
                "Germany / France / Spain / Australia / Canada / Ireland / Italy / Japan / "
                "South Korea",
            ),
            toggle("test", "negation", "", " without taking a new driving test"),
        ),
        roles=("source", "target"),
    ),
    # ---- travel ----
    Intent(
        "baggage_weight_limit",
        (
            "How heavy can my {bag} be on {airline}{cabin}?",
            "Explain the weight limit {airline} sets for a {bag}{cabin}.",
            "{airline} {bag} weight limit{cabin}",
            "Could you tell me the maximum weight for a {bag} when flying {airline}{cabin}?",
            "Air travel: what does {airline} allow a {bag} to weigh{cabin}?",
            "I need to pack a {bag} for a {airline} flight{cabin}, how much can it weigh?",
        ),
        (
            slot("bag", "nouns", "cabin bag / checked suitcase"),
            slot(
                "airline",
                "entities",
                "British Airways / Lufthansa / Emirates / Qantas / KLM / Air Canada / "
                "Singapore Airlines / Turkish Airlines",
            ),
            toggle("cabin", "scope", "", " in business class"),
        ),
    ),
    Intent(
        "airport_to_city_centre",
        (
            "What's the best way to get from {airport} to the city centre{time}{taxi}?",
            "Explain how to travel from {airport} into the city centre{time}{taxi}.",
            "{airport} to city centre transport{time}{taxi}",
            "Could you tell me how to reach the city centre from {airport}{time}{taxi}?",
            "Getting around: which transport goes from {airport} to the centre of "
            "town{time}{taxi}?",
            "I need to get into the city centre from {airport}{time}{taxi}, how should I go?",
        ),
        (
            slot(
                "airport",
                "entities",
                "Heathrow / Charles de Gaulle / Schiphol / Frankfurt Airport / "
                "Barcelona El Prat / Rome Fiumicino / Narita / JFK",
            ),
            toggle("time", "scope", "", " after midnight"),
            toggle("taxi", "negation", "", " without taking a taxi"),
        ),
    ),
    # ---- programming tools ----
    Intent(
        "cron_schedule",
        (
            "What cron expression runs a job every {n} minutes{days}?",
            "Explain how to write a crontab entry that fires every {n} minutes{days}.",
            "cron every {n} minutes{days}",
            "Could you tell me the cron schedule for running something every {n} minutes{days}?",
            "Crontab: how do I schedule a task to run every {n} minutes{days}?",
            "I need a script to run every {n} minutes{days}, what should the cron line be?",
        ),
        (
            slot("n", "numbers", "2 / 5 / 10 / 15 / 20 / 30"),
            toggle("days", "scope", "", " on weekdays only"),
        ),
    ),
    Intent(
        "cross_language_call",
        (
            "How do I call a {callee} function from {caller} code?",
            "Explain how {caller} code can call into a function written in {callee}.",
            "call {callee} function from {caller}",
            "Could you tell me how to invoke a {callee} function from a {caller} program?",
            "Language interop: how do I use a {callee} function inside {caller}?",
            "I need my {caller} code to call a function written in {callee}, how do I set that up?",
        ),
        (
            slot("caller", "entities", "Python / C / C++ / Rust / Go / Java / JavaScript / C#"),
            slot("callee", "entities", "Python / C / C++ / Rust / Go / Java / JavaScript / C#"),
        ),
        roles=("caller", "callee"),
    ),
    # ---- fitness ----
    Intent(
        "rest_between_sets",
        (
            "How long should I rest between sets of {exercise} when training for {goal}?",
            "Explain how much rest to take between {exercise} sets if my goal is {goal}.",
            "rest between sets {exercise} {goal}",
            "Could you tell me the ideal rest time between sets of {exercise} for {goal}?",
            "Gym programming: how many minutes of rest between {exercise} sets for {goal}?",
            "I need to plan my {exercise} sessions for {goal}, how long should I rest between "
            "sets?",
        ),
        (
            slot(
                "exercise",
                "nouns",
                "heavy squats / deadlifts / bench press / bicep curls / lateral raises / "
                "pull-ups / calf raises",
            ),
            slot(
                "goal",
                "nouns",
                "maximum strength / muscle growth / muscular endurance / explosive power",
            ),
        ),
    ),
    Intent(
        "swimming_pool_lengths",
        (
            "How many lengths of a {pool} m pool do I need to swim to cover {distance}?",
            "Explain how many lengths in a {pool}-metre pool add up to {distance}.",
            "{distance} in a {pool}m pool how many lengths",
            "Could you tell me how many lengths of a {pool} metre pool make {distance}?",
            "Swimming: {distance} is how many lengths of a {pool} m pool?",
            "I need to swim {distance} in a {pool} m pool, how many lengths is that?",
        ),
        (
            slot("pool", "numbers", "20 / 25 / 33 / 50"),
            slot("distance", "numbers", "400 m / 1 km / 1,500 m / 1 mile / 2 km / 5 km"),
        ),
    ),
    # ---- home and garden ----
    Intent(
        "wall_fixing_weight",
        (
            "What fixings should I use to hang {weight} kg on a {wall} wall{drill}?",
            "Explain which screws and plugs will hold {weight} kg on a {wall} wall{drill}.",
            "fixings for {weight}kg on {wall} wall{drill}",
            "Could you tell me how to hang something weighing {weight} kg on a {wall} wall{drill}?",
            "DIY: what's the right fixing for a {weight} kg load on a {wall} wall{drill}?",
            "I need to hang {weight} kg on my {wall} wall{drill}, what should I use?",
        ),
        (
            slot("weight", "numbers", "2 / 5 / 10 / 20 / 40"),
            slot(
                "wall",
                "nouns",
                "plasterboard / brick / concrete / lath and plaster / breeze block / tiled",
            ),
            toggle("drill", "negation", "", " without drilling"),
        ),
    ),
    Intent(
        "seed_sowing_time",
        (
            "When should I sow {crop} seeds {place} in {region}?",
            "Explain the right time of year to sow {crop} {place} in {region}.",
            "when to sow {crop} {place} {region}",
            "Could you tell me which month to start {crop} seeds {place} in {region}?",
            "Gardening in {region}: when do {crop} seeds go in {place}?",
            "I need to plan my {crop} sowing {place} in {region}, when should the seeds go in?",
        ),
        (
            slot(
                "crop",
                "nouns",
                "tomato / carrot / lettuce / sweet pepper / pea / courgette / sunflower / leek",
            ),
            toggle("place", "antonyms", "indoors", "outdoors"),
            slot(
                "region",
                "entities",
                "Scotland / Ireland / Ontario / Minnesota / Texas / Tasmania / Bavaria / Oregon",
            ),
        ),
    ),
    Intent(
        "aquarium_stocking",
        (
            "How many {fish} can I keep in a {litres} litre tank?",
            "Explain how many {fish} a {litres}-litre aquarium can hold.",
            "{fish} {litres}L tank how many",
            "Could you tell me how many {fish} fit in a {litres} litre aquarium?",
            "Fishkeeping: what's a safe number of {fish} for a {litres} litre tank?",
            "I need to stock a {litres} litre tank with {fish}, how many should I get?",
        ),
        (
            slot(
                "fish",
                "nouns",
                "neon tetras / guppies / fancy goldfish / zebra danios / corydoras catfish / "
                "platies / cherry shrimp",
            ),
            slot("litres", "numbers", "20 / 40 / 60 / 100 / 200"),
        ),
    ),
    # ---- study, trivia, the sky ----
    Intent(
        "citation_format",
        (
            "How do I cite {source}{author} in {style} style?",
            "Explain the {style} format for referencing {source}{author}.",
            "{style} citation {source}{author}",
            "Could you tell me how to reference {source}{author} using {style} style?",
            "Referencing: what does a {style} citation for {source}{author} look like?",
            "I need to cite {source}{author} in my essay in {style} style, how should it look?",
        ),
        (
            slot(
                "source",
                "nouns",
                "a website / a journal article / a YouTube video / a government report / "
                "a newspaper article / a podcast episode / a chapter in an edited book",
            ),
            slot(
                "style",
                "entities",
                "APA 7th edition / MLA 9th edition / Harvard / Chicago / IEEE / Vancouver",
            ),
            toggle("author", "negation", "", " with no named author"),
        ),
    ),
    Intent(
        "oscar_winner",
        (
            "Which film won {award} at the Oscars in {year}?",
            "Explain which movie took the Academy Award for {award} in {year}.",
            "oscar {award} {year} winner",
            "Could you tell me what won {award} at the {year} Academy Awards?",
            "Film trivia: which film was awarded {award} at the {year} Oscars?",
            "I need the winner of {award} from the {year} Oscars for a quiz, which film was it?",
        ),
        (
            slot(
                "award",
                "entities",
                "Best Picture / Best Animated Feature / Best International Feature / "
                "Best Documentary Feature / Best Original Screenplay / Best Visual Effects",
            ),
            slot("year", "dates", "2005 / 2009 / 2012 / 2016 / 2019 / 2022 / 2024"),
        ),
    ),
    Intent(
        "sunrise_sunset_time",
        (
            "What time is {event} in {city} on {date}?",
            "Explain what time {event} happens in {city} on {date}.",
            "{event} time {city} {date}",
            "Could you tell me when {event} is in {city} on {date}?",
            "Daylight: at what time is {event} in {city} on {date}?",
            "I need to plan a photo walk around {event} in {city} on {date}, what time is it?",
        ),
        (
            toggle("event", "antonyms", "sunrise", "sunset"),
            slot(
                "city",
                "entities",
                "Reykjavik / Oslo / Madrid / Cape Town / Singapore / Buenos Aires / Vancouver / "
                "Edinburgh",
            ),
            slot(
                "date",
                "dates",
                "21 June / 21 December / 1 March / 15 September / 1 November / 10 April",
            ),
        ),
    ),
)
