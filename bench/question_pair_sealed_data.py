"""A sixth, sealed held-out group of question intents, for another blind check of the cache.

Written on 2026-12-07 from language knowledge alone, by a writer told to run no embedding
model, cache or verifier on it: none was run on any of it before it was fixed here, and
nothing in it was tuned to any model's scores. Only the pair generator (pure string code)
was run, to read the pairs it makes. It shares no intent, template or sentence with the
other groups (bench/question_pair_data.py's two halves, bench/question_pair_training_data.py,
bench/question_pair_fresh_data.py and bench/question_pair_blind_data.py): its topics were
chosen away from theirs.
"""

from bench.question_pair_data import Intent, slot, toggle

COUNTRIES = (
    "the UK / the US / Australia / Germany / Japan / India / France / Brazil / Mexico / "
    "South Africa"
)
PLUG_COUNTRIES = (
    "the UK / the US / Australia / Germany / Switzerland / India / Brazil / Israel / "
    "Denmark / Italy"
)
IMAGE_FORMATS = "PNG / JPEG / HEIC / WebP / GIF / TIFF / BMP"

SEALED_INTENTS: tuple[Intent, ...] = (
    # ---- devices and accounts ----
    Intent(
        "take_screenshot",
        (
            "How do I take a screenshot{part} on {device}?",
            "Explain how to capture a screenshot{part} on {device}.",
            "{device} screenshot{part}",
            "Could you tell me which keys or buttons make a screenshot{part} on {device}?",
            "Screen capture on {device}: how do I grab a screenshot{part}?",
            "I want to send someone a screenshot{part} from {device}, how do I take one?",
        ),
        (
            slot(
                "device",
                "entities",
                "Windows 11 / a Mac / an iPhone / a Samsung Galaxy phone / a Chromebook / Ubuntu",
            ),
            toggle("part", "scope", "", " of only part of the screen"),
        ),
    ),
    Intent(
        "social_account_deactivation",
        (
            "How do I {action} my {platform} account{app}?",
            "Walk me through how to {action} an account on {platform}{app}.",
            "{action} {platform} account{app}",
            "Could you tell me how I can {action} my account on {platform}{app}?",
            "{platform} settings: where do I go to {action} my account{app}?",
            "I want to {action} my {platform} account{app}, what do I need to tap?",
        ),
        (
            toggle("action", "antonyms", "deactivate", "reactivate"),
            slot(
                "platform",
                "entities",
                "Facebook / Instagram / TikTok / X / Snapchat / LinkedIn / Threads",
            ),
            toggle("app", "scope", "", " from the mobile app"),
        ),
    ),
    Intent(
        "image_format_conversion",
        (
            "How do I convert a {source} image to {target}{tool}?",
            "Explain how to turn {source} files into {target} files{tool}.",
            "{source} to {target}{tool}",
            "Could you tell me how to change a picture from {source} to {target} format{tool}?",
            "Image formats: how can I resave a {source} picture as {target}{tool}?",
            "I need a {target} version of a {source} photo{tool}, how do I convert it?",
        ),
        (
            slot("source", "entities", IMAGE_FORMATS),
            slot("target", "entities", IMAGE_FORMATS),
            toggle("tool", "negation", "", " without installing any software"),
        ),
        roles=("source", "target"),
    ),
    Intent(
        "read_write_file_format",
        (
            "How do I {action} {fmt} files in {language}?",
            "Show me {language} code that can {action} {fmt} files.",
            "{language} {action} {fmt} file",
            "Could you explain the way to {action} {fmt} files with {language}?",
            "{language} question: what's the usual way to {action} {fmt} files?",
            "I need to {action} {fmt} files from my {language} code, how?",
        ),
        (
            toggle("action", "antonyms", "read", "write"),
            slot("fmt", "nouns", "CSV / JSON / YAML / XML / Excel / Parquet / TOML"),
            slot("language", "entities", "Python / JavaScript / Go / Rust / Java / C# / R / Ruby"),
        ),
    ),
    # ---- abroad: plugs, post, phone calls ----
    Intent(
        "travel_plug_adapter",
        (
            "What plug adapter do I need to use appliances from {home} in {abroad}?",
            "Explain which travel adapter lets a plug from {home} fit the sockets in {abroad}.",
            "plug adapter from {home} to {abroad}",
            "Could you tell me what adapter to pack so my plugs from {home} fit the sockets "
            "in {abroad}?",
            "Travelling from {home} to {abroad}: which plug adapter should I buy?",
            "I'm from {home} and going to {abroad}, what kind of adapter do I need for my plugs?",
        ),
        (
            slot("home", "entities", PLUG_COUNTRIES),
            slot("abroad", "entities", PLUG_COUNTRIES),
        ),
        roles=("home", "abroad"),
    ),
    Intent(
        "parcel_postage_cost",
        (
            "How much does it cost to send a {weight} kg parcel from {origin} to {destination}?",
            "What is the postage for a {weight} kg package going from {origin} to {destination}?",
            "shipping cost {weight}kg parcel from {origin} to {destination}",
            "Could you tell me the price of posting a {weight} kilo box from {origin} to "
            "{destination}?",
            "International post: what would a {weight} kg parcel from {origin} to "
            "{destination} cost?",
            "I need to mail a {weight} kg box from {origin} to {destination}, roughly how much "
            "will it be?",
        ),
        (
            slot("weight", "numbers", "1 / 4 / 10 / 20 / 30"),
            slot("origin", "entities", COUNTRIES),
            slot("destination", "entities", COUNTRIES),
        ),
        roles=("origin", "destination"),
    ),
    Intent(
        "international_dialling",
        (
            "How do I dial a {number} in {target} from {source}?",
            "Explain the digits to dial for a {number} in {target} when phoning from {source}.",
            "dialling code to call a {number} in {target} from {source}",
            "Could you tell me what to dial to reach a {number} in {target} from {source}?",
            "Calling abroad from {source}: how do I ring a {number} in {target}?",
            "I'm in {source} and need to call a {number} in {target}, what do I dial?",
        ),
        (
            toggle("number", "nouns", "phone number", "toll-free number"),
            slot("source", "entities", COUNTRIES),
            slot("target", "entities", COUNTRIES),
        ),
        roles=("source", "target"),
    ),
    # ---- dates and charts ----
    Intent(
        "zodiac_sign_for_birthday",
        (
            "What star sign is someone born on {date}{system}?",
            "Explain which zodiac sign covers a birthday on {date}{system}.",
            "{date} zodiac sign{system}",
            "Could you tell me my star sign if my birthday is {date}{system}?",
            "Astrology: what sign are you if you were born on {date}{system}?",
            "I was born on {date}, what's my zodiac sign{system}?",
        ),
        (
            slot(
                "date",
                "dates",
                "April 5 / May 3 / June 4 / July 2 / August 6 / September 3 / October 5 / "
                "November 2 / December 1 / January 4 / February 8 / March 6",
            ),
            toggle("system", "scope", "", " in Vedic astrology"),
        ),
    ),
    Intent(
        "chart_number_one_on_date",
        (
            "What song was number one in the {chart} charts on {date}?",
            "Which single topped the {chart} chart on {date}?",
            "{chart} number one single {date}",
            "Could you tell me what the {chart} number one was on {date}?",
            "Music charts: which track was at number one in the {chart} on {date}?",
            "I was born on {date}, what song was top of the {chart} charts that day?",
        ),
        (
            toggle("chart", "entities", "UK", "US"),
            slot(
                "date",
                "dates",
                "21 July 1969 / 4 July 1976 / 1 August 1978 / 12 June 1985 / 9 November 1989 / "
                "3 March 1992 / 25 December 1999 / 14 February 2004 / 30 September 2010",
            ),
        ),
    ),
    # ---- learning and maths ----
    Intent(
        "language_learning_time",
        (
            "How long does it take an English speaker to learn {language}{level}, studying "
            "{hours} hours a week?",
            "Estimate how long a native English speaker needs to learn {language}{level} at "
            "{hours} hours of study per week.",
            "English speaker learning {language}{level} at {hours} hours a week: how long?",
            "Could you tell me how long learning {language}{level} would take me with {hours} "
            "hours of practice a week? My native language is English.",
            "Language learning: at {hours} hours a week, how long until a native English "
            "speaker learns {language}{level}?",
            "I speak English and can study {language} for {hours} hours a week, how long will "
            "it take me to learn it{level}?",
        ),
        (
            slot(
                "language",
                "entities",
                "Spanish / German / Russian / Japanese / Indonesian / Arabic",
            ),
            slot("hours", "numbers", "2 / 5 / 10 / 15 / 25"),
            toggle("level", "scope", "", " to a conversational level"),
        ),
    ),
    Intent(
        "dice_total_probability",
        (
            "What is the probability of rolling {bound} {total} with {dice} dice?",
            "Work out the chance that {dice} dice add up to {bound} {total}.",
            "{dice} dice total {bound} {total} probability",
            "Could you tell me how likely it is to get a total of {bound} {total} when I throw "
            "{dice} dice?",
            "Probability question: if I roll {dice} standard dice, how likely is a sum of "
            "{bound} {total}?",
            "I need the chance of {dice} dice summing to {bound} {total}, what is it?",
        ),
        (
            slot("dice", "numbers", "two / three / four"),
            toggle("bound", "antonyms", "at least", "at most"),
            slot("total", "numbers", "5 / 6 / 8 / 9 / 10 / 11 / 12"),
        ),
    ),
    Intent(
        "calculus_derivative_integral",
        (
            "What is the {op} of {function}?",
            "Find the {op} of {function} with respect to x.",
            "{op} of {function}",
            "Could you work out the {op} of {function} for me?",
            "Calculus: what do you get when you take the {op} of {function}?",
            "I need the {op} of {function} for my homework, what is it?",
        ),
        (
            toggle("op", "antonyms", "derivative", "integral"),
            slot(
                "function",
                "nouns",
                "sin(x) / cos(x) / e^(2x) / ln(x) / x^3 / tan(x) / 1/x / x*e^x / sqrt(x)",
            ),
        ),
    ),
    # ---- cars ----
    Intent(
        "dashboard_warning_light",
        (
            "What does it mean when the {light} on my car is {state}?",
            "Explain why a car's {light} would be {state}.",
            "car {light} {state} meaning",
            "Could you tell me what it means if my {light} is {state}?",
            "Dashboard warning: my {light} is {state}, what does that mean?",
            "I've just noticed the {light} in my car is {state}, what is it telling me?",
        ),
        (
            slot(
                "light",
                "nouns",
                "check engine light / oil pressure light / battery light / "
                "coolant temperature light / brake warning light / ABS light / airbag light / "
                "traction control light",
            ),
            toggle("state", "antonyms", "flashing", "staying on"),
        ),
    ),
    # ---- ropes ----
    Intent(
        "tie_or_untie_knot",
        (
            "How do I {action} a {knot}?",
            "Explain the steps to {action} a {knot}.",
            "{knot} how to {action}",
            "Could you tell me the way to {action} a {knot}?",
            "Knots: what's the method to {action} a {knot}?",
            "I need to {action} a {knot} and can't remember how, can you talk me through it?",
        ),
        (
            toggle("action", "antonyms", "tie", "untie"),
            slot(
                "knot",
                "nouns",
                "bowline / clove hitch / figure-eight loop / reef knot / sheet bend / "
                "trucker's hitch / double fisherman's knot / Prusik knot",
            ),
        ),
    ),
    # ---- health and sun ----
    Intent(
        "contagious_period",
        (
            "How long is someone with {illness} contagious {when} symptoms start?",
            "Explain for how many days {illness} can spread {when} the symptoms appear.",
            "{illness} contagious period {when} symptoms",
            "Could you tell me how long a person with {illness} can pass it on {when} they get "
            "symptoms?",
            "Infection question: {when} symptoms show, how long can {illness} be passed on?",
            "I've got {illness}, how long am I contagious {when} the symptoms begin?",
        ),
        (
            slot(
                "illness",
                "nouns",
                "chickenpox / flu / glandular fever / COVID-19 / norovirus / measles / "
                "strep throat / mumps / whooping cough",
            ),
            toggle("when", "antonyms", "before", "after"),
        ),
    ),
    Intent(
        "uv_index_protection",
        (
            "What sun protection is needed{who} when the UV index is {uv}?",
            "Explain what sun protection to use{who} on a day with a UV index of {uv}.",
            "UV index {uv} sun protection{who}",
            "Could you tell me what precautions to take{who} when the UV index is {uv}?",
            "Weather app says UV {uv}: what protection from the sun is needed{who}?",
            "The UV index today is {uv}, what sunscreen and covering up are needed{who}?",
        ),
        (
            slot("uv", "numbers", "2 / 4 / 7 / 9 / 11"),
            toggle("who", "scope", "", " for a young child"),
        ),
    ),
    # ---- clothes and occasions ----
    Intent(
        "dress_code_meaning",
        (
            "What should {who} wear to an event with a {code} dress code?",
            "Explain what a {code} dress code means for {who}.",
            "{code} dress code for {who}",
            "Could you tell me what counts as {code} for {who}?",
            "Invitation says {code}: what should {who} wear?",
            "I'm {who} and the dress code is {code}, what am I expected to wear?",
        ),
        (
            toggle("who", "antonyms", "a man", "a woman"),
            slot(
                "code",
                "nouns",
                "black tie / white tie / cocktail attire / business casual / smart casual / "
                "lounge suit / semi-formal / festive attire",
            ),
        ),
    ),
    Intent(
        "shorten_garment",
        (
            "How do I shorten {garment}{machine}?",
            "Explain how to take up the hem on {garment}{machine}.",
            "shorten {garment}{machine}",
            "Could you tell me how to take {garment} up{machine}?",
            "Alterations: what's the way to make {garment} shorter{machine}?",
            "I need to shorten {garment}{machine}, where do I start?",
        ),
        (
            slot(
                "garment",
                "nouns",
                "jeans / curtains / a skirt / suit trousers / a wedding dress / a T-shirt / "
                "a winter coat",
            ),
            toggle("machine", "negation", "", " without a sewing machine"),
        ),
    ),
    # ---- home and films ----
    Intent(
        "descale_appliance",
        (
            "How do I descale {appliance}{vinegar}?",
            "Explain how to remove limescale from {appliance}{vinegar}.",
            "descale {appliance}{vinegar}",
            "Could you tell me how to clear limescale from {appliance}{vinegar}?",
            "Hard water problem: how can I shift the limescale from {appliance}{vinegar}?",
            "I need to descale {appliance}{vinegar}, what's the method?",
        ),
        (
            slot(
                "appliance",
                "nouns",
                "a kettle / a shower head / a washing machine / a steam iron / a toilet bowl / "
                "a dishwasher / a bathroom tap / a glass shower screen",
            ),
            toggle("vinegar", "negation", "", " without vinegar"),
        ),
    ),
    Intent(
        "film_series_watch_order",
        (
            "What is the {order} order of the {franchise} films?",
            "List the {franchise} movies in {order} order.",
            "{franchise} films {order} order",
            "Could you tell me how to watch the {franchise} films in {order} order?",
            "Movie marathon: what's the {order} order for the {franchise} films?",
            "I want to watch every {franchise} film in {order} order, which comes first and "
            "what follows?",
        ),
        (
            slot(
                "franchise",
                "entities",
                "Star Wars / Marvel Cinematic Universe / X-Men / Fast & Furious / Alien / "
                "Middle-earth / Godzilla MonsterVerse / Wizarding World",
            ),
            toggle("order", "antonyms", "release", "chronological"),
        ),
    ),
)
