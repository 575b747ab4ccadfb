"""A fresh group of question intents, the fourth: held out once, development data since.

Written on 2026-12-07 from language knowledge alone, after the third group
(bench/question_pair_training_data.py) had been folded into the semantic cache's development
data because the error bound failed on it. No embedding model, cache or verifier scored any
of it before it was fixed here, and nothing in it was tuned to any model's scores. It shares
no intent, template or sentence with the other groups (bench/question_pair_data.py and
bench/question_pair_training_data.py): its topics were chosen away from theirs.
"""

from bench.question_pair_data import Intent, slot, toggle

FRESH_INTENTS: tuple[Intent, ...] = (
    # ---- cars, sport, hobbies ----
    Intent(
        "tyre_pressure",
        (
            "What pressure should the {axle} tyres on a {car} be inflated to{load}?",
            "Explain what tyre pressure a {car} needs at the {axle}{load}.",
            "{car} {axle} tyre pressure{load}",
            "Could you tell me the right pressure for the {axle} tyres of my {car}{load}?",
            "Tyres: how many psi should a {car} run in the {axle} tyres{load}?",
            "I need to pump up the {axle} tyres on my {car}{load}, what pressure should I use?",
        ),
        (
            slot(
                "car",
                "entities",
                "Skoda Octavia / Renault Clio / Kia Sportage / Tesla Model 3 / Nissan Qashqai / "
                "Peugeot 208 / Volvo XC60 / Ford Focus",
            ),
            toggle("axle", "antonyms", "front", "rear"),
            toggle("load", "scope", "", " with a full load on board"),
        ),
    ),
    Intent(
        "cycling_event_training",
        (
            "How should I train for a {distance} km bike ride that is {weeks} weeks away{level}?",
            "Explain how to prepare for a {distance} km cycling event in {weeks} weeks{level}.",
            "training plan {distance} km ride {weeks} weeks{level}",
            "Could you tell me how to get ready for a {distance} km ride with {weeks} weeks to "
            "go{level}?",
            "Cycling: how do I build up to {distance} km in the {weeks} weeks I have left{level}?",
            "I need to be fit enough to cycle {distance} km in {weeks} weeks' time{level}, what "
            "training should I do?",
        ),
        (
            slot("distance", "numbers", "50 / 60 / 100 / 160 / 200 / 300"),
            slot("weeks", "numbers", "4 / 6 / 8 / 12 / 16"),
            toggle("level", "scope", "", " as a complete beginner"),
        ),
    ),
    Intent(
        "photo_camera_settings",
        (
            "What camera settings should I use to photograph {subject} {light}?",
            "Explain which aperture, shutter speed and ISO to pick for shooting {subject} {light}.",
            "camera settings for {subject} {light}",
            "Could you tell me the best settings for taking pictures of {subject} {light}?",
            "Photography: which settings work well for {subject} {light}?",
            "I need to shoot {subject} {light}, how should I set up my camera?",
        ),
        (
            slot(
                "subject",
                "nouns",
                "a waterfall / birds in flight / a portrait / a football match / "
                "a snowy landscape / a city skyline / a running dog",
            ),
            toggle("light", "antonyms", "in bright sunlight", "in low light"),
        ),
    ),
    Intent(
        "board_game_setup",
        (
            "How do I set up {game} for {players} players?",
            "Explain the setup of {game} for a {players}-player game.",
            "{game} setup {players} players",
            "Could you tell me how to lay out a game of {game} with {players} players?",
            "{game} rules: how is the game prepared when {players} people are playing?",
            "I need to get {game} ready for {players} of us, what's the setup?",
        ),
        (
            slot(
                "game",
                "entities",
                "Catan / Ticket to Ride / Pandemic / Azul / 7 Wonders / Splendor / Dominion / "
                "Terraforming Mars",
            ),
            slot("players", "numbers", "2 / 3 / 4 / 5"),
        ),
    ),
    Intent(
        "knitting_yarn_amount",
        (
            "How many metres of {yarn} yarn do I need to knit {item}{size}?",
            "Explain how much {yarn} yarn it takes to knit {item}{size}.",
            "{yarn} yarn needed for {item}{size}",
            "Could you tell me how much {yarn} yarn I should buy to knit {item}{size}?",
            "Knitting: what length of {yarn} yarn goes into {item}{size}?",
            "I need to buy {yarn} yarn for {item}{size}, how much should I get?",
        ),
        (
            slot(
                "yarn",
                "nouns",
                "double knitting / chunky / aran / worsted / fingering / super chunky",
            ),
            slot(
                "item",
                "nouns",
                "a scarf / a beanie / a cardigan / a pair of socks / a jumper / "
                "a pair of mittens / a cowl",
            ),
            toggle("size", "scope", "", " in a child's size"),
        ),
    ),
    Intent(
        "bread_dough_hydration",
        (
            "What hydration should I use for {bread} made with {flour} flour{skill}?",
            "Explain what hydration level suits {bread} baked with {flour} flour{skill}.",
            "{bread} {flour} flour hydration percentage{skill}",
            "Could you tell me the right dough hydration for {bread} using {flour} flour{skill}?",
            "Bread baking: how much water to flour for {bread} with {flour} flour{skill}?",
            "I need to pick a hydration for {bread} from {flour} flour{skill}, what should it be?",
        ),
        (
            slot(
                "bread",
                "nouns",
                "focaccia / baguettes / ciabatta / sandwich loaves / bagels / sourdough boules / "
                "pizza dough",
            ),
            slot("flour", "nouns", "white bread / whole wheat / spelt / rye / einkorn"),
            toggle("skill", "scope", "", " if I'm a beginner"),
        ),
    ),
    # ---- devices, apps, office ----
    Intent(
        "spreadsheet_count_if",
        (
            "Which Excel formula counts the cells in column A that are {cmp} {n}?",
            "Explain how to count cells in column A with a value {cmp} {n} using an Excel formula.",
            "excel formula count cells {cmp} {n} in column A",
            "Could you tell me the Excel formula for counting how many cells in column A are "
            "{cmp} {n}?",
            "Excel: what formula counts the column A cells {cmp} {n}?",
            "I need to count the cells in column A of an Excel sheet that are {cmp} {n}, how?",
        ),
        (
            toggle("cmp", "antonyms", "greater than", "less than"),
            slot("n", "numbers", "0 / 10 / 50 / 100 / 500 / 1,000"),
        ),
    ),
    Intent(
        "phone_battery_life",
        (
            "How can I make my {phone} battery last longer{weather}?",
            "Explain how to get more battery life out of a {phone}{weather}.",
            "{phone} battery life tips{weather}",
            "Could you tell me ways to stop my {phone} battery draining so fast{weather}?",
            "Battery: how do I stretch the charge on my {phone}{weather}?",
            "I need my {phone} to last longer on one charge{weather}, how?",
        ),
        (
            slot(
                "phone",
                "entities",
                "iPhone 14 / Samsung Galaxy S23 / Google Pixel 8 / OnePlus 11 / Xiaomi 13 / "
                "Motorola Edge 40 / Sony Xperia 5 / Nokia G60",
            ),
            toggle("weather", "scope", "", " in cold weather"),
        ),
    ),
    Intent(
        "router_wifi_password",
        (
            "How do I change the Wi-Fi password on my {router} router{pc}?",
            "Explain how to set a new Wi-Fi password on a {router} router{pc}.",
            "change wifi password {router} router{pc}",
            "Could you tell me the steps for changing the wireless password on my {router} "
            "router{pc}?",
            "{router} router: how do I change the Wi-Fi password{pc}?",
            "I need a new Wi-Fi password on my {router} router{pc}, how do I set it?",
        ),
        (
            slot(
                "router",
                "entities",
                "Netgear / TP-Link / Asus / Linksys / Huawei / Eero / Google Nest / D-Link",
            ),
            toggle("pc", "negation", "", " without a computer"),
        ),
    ),
    Intent(
        "email_auto_forward",
        (
            "How do I automatically forward all my email from {source} to {target}{copy}?",
            "Explain how to set up automatic forwarding of every message from {source} to "
            "{target}{copy}.",
            "auto forward {source} emails to {target}{copy}",
            "Could you tell me how to make {source} forward all incoming mail to {target}{copy}?",
            "Email: how can I have {source} pass all my mail on to {target} automatically{copy}?",
            "I need all my {source} mail to be forwarded to {target} automatically{copy}, how?",
        ),
        (
            slot(
                "source",
                "entities",
                "Gmail / Outlook.com / Yahoo Mail / iCloud Mail / Proton Mail / Zoho Mail / "
                "Fastmail / GMX",
            ),
            slot(
                "target",
                "entities",
                "Gmail / Outlook.com / Yahoo Mail / iCloud Mail / Proton Mail / Zoho Mail / "
                "Fastmail / GMX",
            ),
            toggle("copy", "negation", "", " without keeping a copy"),
        ),
        roles=("source", "target"),
    ),
    Intent(
        "cloud_free_storage",
        (
            "How much free storage did {service} give you in {year}?",
            "Explain how much storage {service} offered for free in {year}.",
            "{service} free storage {year}",
            "Could you tell me the size of the free {service} plan in {year}?",
            "Cloud storage: what was the free quota on {service} in {year}?",
            "I need to know how much free space {service} included in {year}, what was it?",
        ),
        (
            slot(
                "service",
                "entities",
                "Google Drive / iCloud / OneDrive / Dropbox / Box / MEGA / pCloud / Proton Drive",
            ),
            slot("year", "dates", "2014 / 2016 / 2018 / 2020 / 2022 / 2024"),
        ),
    ),
    Intent(
        "exam_revision_plan",
        (
            "How should I revise for {exam} with {weeks} weeks left{work}?",
            "Explain how to plan my revision for {exam} over the next {weeks} weeks{work}.",
            "{exam} revision plan {weeks} weeks{work}",
            "Could you tell me how to structure {weeks} weeks of revision for {exam}{work}?",
            "Exam prep: what's the best way to study for {exam} in {weeks} weeks{work}?",
            "I need to be ready for {exam} in {weeks} weeks{work}, how should I revise?",
        ),
        (
            slot(
                "exam",
                "entities",
                "GCSE maths / A-level chemistry / the SAT / the IELTS / the GRE / the LSAT / "
                "the MCAT / the CFA Level I exam",
            ),
            slot("weeks", "numbers", "2 / 3 / 4 / 6 / 8 / 12"),
            toggle("work", "scope", "", " while working full time"),
        ),
    ),
    # ---- home, family, pets, garden ----
    Intent(
        "baby_formula_feed",
        (
            "How much formula should a {weeks}-week-old baby{early} drink at each feed?",
            "Explain how many millilitres of formula a baby of {weeks} weeks{early} needs per "
            "feed.",
            "formula per feed for a {weeks} week old baby{early}",
            "Could you tell me how much formula to give my {weeks}-week-old{early} at one feed?",
            "Bottle feeding a {weeks}-week-old{early}: how much formula per feed?",
            "I need to make up a bottle for a {weeks}-week-old baby{early}, how much formula per "
            "feed?",
        ),
        (
            slot("weeks", "numbers", "1 / 2 / 4 / 6 / 10 / 12 / 16 / 20"),
            toggle("early", "scope", "", " who was born prematurely"),
        ),
    ),
    Intent(
        "dog_grooming_frequency",
        (
            "How often does a {breed} need {task}?",
            "Explain how often I should give my {breed} {task}.",
            "{breed} {task} how often",
            "Could you tell me how frequently a {breed} should have {task}?",
            "Dog grooming: how often should a {breed} get {task}?",
            "I need to plan grooming for my {breed}; how often does it need {task}?",
        ),
        (
            slot(
                "breed",
                "entities",
                "Poodle / Shih Tzu / Golden Retriever / Bichon Frise / Cocker Spaniel / Samoyed / "
                "Miniature Schnauzer / Pug",
            ),
            slot(
                "task",
                "nouns",
                "a bath / a haircut / a nail trim / a brush-out / an ear clean / a dental clean",
            ),
        ),
    ),
    Intent(
        "heater_running_cost",
        (
            "How much does it cost to run a {watts} W heater for {hours} hours at {price}p per "
            "kWh?",
            "Work out what it costs to run a {watts}-watt heater for {hours} hours when "
            "electricity is {price}p per kWh.",
            "cost {watts}W heater {hours} hours {price}p/kWh",
            "Could you tell me what {hours} hours of a {watts} watt heater costs at {price} pence "
            "a kWh?",
            "Home energy: what's the cost of {hours} hours on a {watts} W heater with power at "
            "{price}p per kWh?",
            "I need to budget for running a {watts} W heater for {hours} hours at {price}p per "
            "unit, what will it cost?",
        ),
        (
            slot("watts", "numbers", "500 / 1,000 / 1,500 / 2,000 / 3,000"),
            slot("hours", "numbers", "2 / 3 / 5 / 8 / 10"),
            slot("price", "numbers", "15 / 24 / 28 / 34"),
        ),
    ),
    Intent(
        "heating_cost_comparison",
        (
            "Is heating a home with {first} cheaper than with {second}{house}?",
            "Explain whether {first} costs less to run than {second} for home heating{house}.",
            "{first} cheaper than {second} for home heating{house}?",
            "Could you tell me if it's cheaper to heat my home with {first} than with "
            "{second}{house}?",
            "Home energy: does {first} cost less to run than {second}{house}?",
            "I need to choose how to heat my home: is {first} cheaper to run than {second}{house}?",
        ),
        (
            slot(
                "first",
                "nouns",
                "a gas boiler / a heat pump / an oil boiler / an electric boiler / "
                "a wood-burning stove / an LPG boiler",
            ),
            slot(
                "second",
                "nouns",
                "a gas boiler / a heat pump / an oil boiler / an electric boiler / "
                "a wood-burning stove / an LPG boiler",
            ),
            toggle("house", "scope", "", " if the house is poorly insulated"),
        ),
        roles=("first", "second"),
    ),
    Intent(
        "insurance_cover",
        (
            "Does {policy} insurance cover {damage}?",
            "Explain whether {damage} is covered by {policy} insurance.",
            "{policy} insurance {damage} covered",
            "Could you tell me if {policy} insurance pays out for {damage}?",
            "Insurance claims: is {damage} covered under {policy} insurance?",
            "I need to claim for {damage}, will {policy} insurance cover it?",
        ),
        (
            slot(
                "policy",
                "nouns",
                "home contents / buildings / car / travel / renters / landlord",
            ),
            slot(
                "damage",
                "nouns",
                "flood damage / storm damage / accidental damage / theft / fire damage / "
                "vandalism / water damage",
            ),
        ),
    ),
    Intent(
        "garden_pest_control",
        (
            "How do I control {pest} on my {plant}{bees}?",
            "Explain how to deal with {pest} attacking {plant}{bees}.",
            "{pest} on {plant} treatment{bees}",
            "Could you tell me how to stop {pest} damaging my {plant}{bees}?",
            "Gardening: what's the best way to tackle {pest} on {plant}{bees}?",
            "I need to clear {pest} off my {plant}{bees}, how?",
        ),
        (
            slot(
                "pest",
                "nouns",
                "aphids / slugs / whitefly / spider mites / vine weevils / caterpillars / "
                "scale insects",
            ),
            slot(
                "plant",
                "nouns",
                "roses / tomatoes / cabbages / strawberries / hostas / runner beans",
            ),
            toggle("bees", "negation", "", " without harming bees"),
        ),
    ),
    # ---- going out, places, rules ----
    Intent(
        "museum_opening_hours",
        (
            "What are the opening hours of the {museum} on {day}?",
            "Explain when the {museum} opens and closes on {day}.",
            "{museum} opening hours {day}",
            "Could you tell me what times the {museum} is open on {day}?",
            "Museum visit: when is the {museum} open on {day}?",
            "I need to plan a trip to the {museum} on {day}, when is it open?",
        ),
        (
            slot(
                "museum",
                "entities",
                "Louvre / British Museum / Rijksmuseum / Prado / Uffizi Gallery / "
                "Metropolitan Museum of Art / Van Gogh Museum / Acropolis Museum",
            ),
            slot(
                "day",
                "dates",
                "Monday / Tuesday / Wednesday / Thursday / Friday / Saturday / Sunday",
            ),
        ),
    ),
    Intent(
        "street_parking_rules",
        (
            "Can I park on a {marking} in {city} on a {day}?",
            "Explain whether parking on a {marking} is allowed in {city} on a {day}.",
            "parking on {marking} {city} {day}",
            "Could you tell me if it's legal to park on a {marking} in {city} on a {day}?",
            "Parking in {city}: am I allowed to leave my car on a {marking} on a {day}?",
            "I need to leave my car on a {marking} in {city} on a {day}, is that allowed?",
        ),
        (
            slot(
                "marking",
                "nouns",
                "single yellow line / double yellow line / red route / residents' bay / "
                "loading bay / zigzag line",
            ),
            slot(
                "city",
                "entities",
                "London / Manchester / Birmingham / Leeds / Glasgow / Bristol / Cardiff / "
                "Edinburgh",
            ),
            slot("day", "dates", "Saturday / Sunday / Monday / Wednesday / Friday"),
        ),
    ),
)
