"""A development group of 30 more question intents for the semantic cache's false-hit table.

Written on 2026-12-07 by a writer told to run no model on it: no embedding model, cache,
verifier or calibration scored any of it before it was fixed here, and it was written from
language knowledge alone, as the other groups were. It adds more question families to the
development pairs of the semantic cache's false-hit table (bench/calibration.py), and shares
no intent, template or rendered sentence with the other groups (checked by string comparison
against bench/question_pair_data.py, bench/question_pair_training_data.py and the held-out
FRESH and BLIND groups when it was written; their topics were not read).
"""

from bench.question_pair_data import Intent, slot, toggle

EXTRA_INTENTS: tuple[Intent, ...] = (
    # ---- health, family, everyday life ----
    Intent(
        "first_aid_treatment",
        (
            "What's the right first aid for {injury}{patient}{kit}?",
            "How should I treat {injury}{patient}{kit}?",
            "first aid for {injury}{patient}{kit}",
            "Could you walk me through the first aid for {injury}{patient}{kit}?",
            "Quick: {injury}{patient}{kit}. What first aid do I give?",
            "I'm dealing with {injury}{patient} right now{kit}. What first aid should I give?",
        ),
        (
            slot(
                "injury",
                "nouns",
                "a burn / a sprained ankle / a nosebleed / a bee sting / a deep cut / "
                "a jellyfish sting / a dog bite / a splinter",
            ),
            toggle("patient", "scope", "", " in a toddler"),
            toggle("kit", "negation", "", " without a first aid kit"),
        ),
    ),
    Intent(
        "vaccine_dose_age",
        (
            "At what age does a child get the {dose} dose of the {vaccine} vaccine in {country}?",
            "In {country}, when is the {dose} {vaccine} jab given to children?",
            "{vaccine} vaccine {dose} dose age {country}",
            "Could you tell me how old children are when they get their {dose} {vaccine} shot in "
            "{country}?",
            "Childhood immunisation schedule in {country}: when is the {dose} {vaccine} dose due?",
            "We live in {country} and have a new baby. At what age will they have the {dose} "
            "{vaccine} vaccination?",
        ),
        (
            toggle("dose", "antonyms", "first", "last"),
            slot(
                "vaccine",
                "nouns",
                "MMR / polio / hepatitis B / whooping cough / rotavirus / pneumococcal",
            ),
            slot(
                "country",
                "entities",
                "the UK / the US / Australia / Canada / Germany / Ireland / New Zealand",
            ),
        ),
    ),
    Intent(
        "sleep_hours_by_age",
        (
            "What's the {bound} amount of sleep recommended for {age}?",
            "According to sleep guidelines, what's the {bound} number of hours {age} should "
            "sleep in a day?",
            "{bound} recommended sleep hours for {age}",
            "Could you tell me the {bound} hours of sleep per day advised for {age}?",
            "Sleep guidelines: what is the recommended daily {bound} for {age}?",
            "I'm worried my family isn't resting enough. What's the {bound} daily sleep "
            "recommended for {age}?",
        ),
        (
            toggle("bound", "antonyms", "minimum", "maximum"),
            slot(
                "age",
                "nouns",
                "a newborn / a 6-month-old baby / a 2-year-old / a 4-year-old / a 9-year-old / "
                "a 15-year-old / an adult",
            ),
        ),
    ),
    Intent(
        "tipping_custom",
        (
            "How much should I tip {worker} in {country}?",
            "In {country}, what's the usual tip for {worker}?",
            "tipping {worker} in {country} how much",
            "Could you tell me the customary tip for {worker} in {country}?",
            "Tipping etiquette in {country}: how much do people normally give {worker}?",
            "I'm travelling to {country} next month. How much is it normal to tip {worker}?",
        ),
        (
            slot(
                "worker",
                "nouns",
                "a taxi driver / a restaurant waiter / a hotel housekeeper / a hairdresser / "
                "a tour guide / a bartender / a food delivery rider",
            ),
            slot(
                "country",
                "entities",
                "Japan / the US / France / Mexico / Germany / Egypt / Thailand / Australia",
            ),
        ),
    ),
    Intent(
        "recycling_item_rules",
        (
            "Can {item} go in the recycling bin in {city}{rinse}?",
            "In {city}, am I allowed to put {item} in the recycling{rinse}?",
            "recycle {item} {city}{rinse}",
            "Could you tell me whether {item} can be recycled in {city}{rinse}?",
            "{city} recycling rules: do {item} belong in the recycling bin{rinse}?",
            "I'm clearing out my kitchen in {city}. Can I recycle {item}{rinse}?",
        ),
        (
            slot(
                "item",
                "nouns",
                "glass jars / yogurt pots / tin cans / milk cartons / plastic bottles / "
                "takeaway containers / aluminium foil trays",
            ),
            slot(
                "city",
                "entities",
                "London / Berlin / Toronto / San Francisco / Melbourne / Dublin / Amsterdam",
            ),
            toggle("rinse", "negation", "", " without rinsing them first"),
        ),
    ),
    # ---- software, devops ----
    Intent(
        "regex_validation",
        (
            "What regex validates {pattern} in {language}?",
            "Write a regular expression that validates {pattern} in {language}.",
            "{language} regex to validate {pattern}",
            "Could you give me a {language} regex for validating {pattern}?",
            "Regex question ({language}): how do I check that a string is {pattern}?",
            "I need to validate {pattern} with a regex in {language}. What pattern should I use?",
        ),
        (
            slot(
                "pattern",
                "nouns",
                "an email address / a UK postcode / a US phone number / an IPv4 address / "
                "a hex colour code / a date in YYYY-MM-DD format / a time in 24-hour format",
            ),
            slot(
                "language",
                "entities",
                "Python / JavaScript / Java / Go / PHP / C# / Ruby / Rust",
            ),
        ),
    ),
    Intent(
        "sql_join_rows",
        (
            "In SQL, which rows does {first} {join} JOIN {second} return?",
            "Explain which rows come back from {first} {join} JOIN {second} in SQL.",
            "sql {first} {join} join {second} which rows returned",
            "Could you tell me what rows I get from {first} {join} JOIN {second}?",
            "SQL joins: what does SELECT * FROM {first} {join} JOIN {second} ON the matching id "
            "return?",
            "I'm learning SQL and I'm confused: if I write {first} {join} JOIN {second}, which "
            "rows come back?",
        ),
        (
            slot(
                "first",
                "nouns",
                "customers / orders / products / suppliers / employees / departments / students / "
                "enrolments",
            ),
            slot(
                "second",
                "nouns",
                "customers / orders / products / suppliers / employees / departments / students / "
                "enrolments",
            ),
            toggle("join", "antonyms", "LEFT", "RIGHT"),
        ),
        roles=("first", "second"),
    ),
    Intent(
        "docker_port_mapping",
        (
            "How do I map port {host} on the host to port {inner} inside a Docker "
            "container{compose}?",
            "What's the Docker option to publish container port {inner} on host port "
            "{host}{compose}?",
            "docker map host port {host} to container port {inner}{compose}",
            "Could you show me how to expose port {inner} of a container as port {host} on my "
            "machine{compose}?",
            "Docker port mapping{compose}: how do I send host port {host} to port {inner} in the "
            "container?",
            "My app in Docker listens on port {inner}. How do I reach it on port {host} of the "
            "host{compose}?",
        ),
        (
            slot("host", "numbers", "80 / 443 / 3000 / 5000 / 8000 / 8080 / 8443 / 5432"),
            slot("inner", "numbers", "80 / 443 / 3000 / 5000 / 8000 / 8080 / 8443 / 5432"),
            toggle("compose", "scope", "", " in a Docker Compose file"),
        ),
        roles=("host", "inner"),
    ),
    Intent(
        "kubectl_list_resources",
        (
            "What kubectl command lists all {resource}{where}?",
            "How do I list every one of the {resource}{where} with kubectl?",
            "kubectl list {resource}{where}",
            "Could you tell me how to see all {resource}{where} using kubectl?",
            "Kubernetes: how do I show all {resource}{where}?",
            "I'm debugging a cluster and need to see all the {resource}{where}. What's the "
            "kubectl command?",
        ),
        (
            slot(
                "resource",
                "nouns",
                "pods / deployments / services / secrets / config maps / "
                "persistent volume claims / ingresses / cron jobs",
            ),
            toggle("where", "scope", " in the current namespace", " across all namespaces"),
        ),
    ),
    Intent(
        "unit_test_assertion",
        (
            "Using {framework}, how do I write a test that checks {fn} function {behaviour}?",
            "In {framework}, how can I test that {fn} function {behaviour}?",
            "{framework} test to assert {fn} function {behaviour}",
            "Could you show me a unit test in {framework} verifying that {fn} function "
            "{behaviour}?",
            "I'm using {framework}. How do I assert in a test that {fn} function {behaviour}?",
            "Write me a test in {framework} which confirms that {fn} function {behaviour}.",
        ),
        (
            slot(
                "framework",
                "entities",
                "pytest / unittest / Jest / Mocha / Vitest / Jasmine / NUnit / xUnit",
            ),
            toggle("fn", "scope", "a", "an async"),
            slot(
                "behaviour",
                "nouns",
                "throws an exception / logs a warning / calls a dependency with the right "
                "arguments / writes to a file / returns within one second / returns a sorted list",
            ),
        ),
    ),
    # ---- money ----
    Intent(
        "salary_take_home",
        (
            "What's the take-home pay on a {amount} salary in {state} in {year}{filing}?",
            "If I earn {amount} a year in {state}, how much do I keep after tax in {year}{filing}?",
            "{amount} salary after tax {state} {year}{filing}",
            "Could you work out my net pay for {year} on {amount} a year in {state}{filing}?",
            "Income tax in {state}, {year}: what is {amount} a year after taxes{filing}?",
            "I just got an offer of {amount} a year in {state}. What would I take home after tax "
            "in {year}{filing}?",
        ),
        (
            slot(
                "amount", "numbers", "$45,000 / $60,000 / $75,000 / $90,000 / $120,000 / $150,000"
            ),
            slot(
                "state",
                "entities",
                "California / Texas / New York / Florida / Washington / Illinois / Massachusetts / "
                "Oregon",
            ),
            slot("year", "dates", "2022 / 2023 / 2024 / 2025"),
            toggle("filing", "scope", "", " as a married couple filing jointly"),
        ),
    ),
    Intent(
        "credit_card_payoff",
        (
            "How much do I need to pay each month to clear a {balance} credit card balance at "
            "{apr}% APR within {months} months?",
            "What monthly payment pays off {balance} on a credit card charging {apr}% APR in "
            "{months} months?",
            "credit card payoff {balance} {apr}% apr {months} months monthly payment",
            "Could you work out the monthly payment needed to pay off a {balance} card balance "
            "at {apr}% APR over {months} months?",
            "Credit card debt: {balance} at {apr}% APR. What do I pay per month to be debt-free "
            "in {months} months?",
            "I owe {balance} on my credit card at {apr}% APR and want it gone in {months} months. "
            "How much should I pay each month?",
        ),
        (
            slot("balance", "numbers", "$1,500 / $3,000 / $5,000 / $8,000 / $12,000"),
            slot("apr", "numbers", "18 / 21.9 / 24.5 / 27 / 29.99"),
            slot("months", "numbers", "6 / 12 / 18 / 24 / 36"),
        ),
    ),
    Intent(
        "debt_payoff_order",
        (
            "Should I pay off my {first} before my {second}?",
            "Is it smarter to clear my {first} first and only then my {second}?",
            "pay off {first} before {second}?",
            "Could you tell me whether it makes sense to prioritise paying down my {first} over "
            "my {second}?",
            "Debt repayment: does my {first} come before my {second}?",
            "I have some spare cash each month. Should it go towards my {first} before my "
            "{second}?",
        ),
        (
            slot(
                "first",
                "nouns",
                "credit card balance / car loan / mortgage / student loan / overdraft / "
                "personal loan / payday loan",
            ),
            slot(
                "second",
                "nouns",
                "credit card balance / car loan / mortgage / student loan / overdraft / "
                "personal loan / payday loan",
            ),
        ),
        roles=("first", "second"),
    ),
    Intent(
        "savings_compound_growth",
        (
            "How much will {amount} grow to after {years} years at {rate}% interest compounded "
            "{freq}?",
            "If I put {amount} in a savings account paying {rate}% compounded {freq}, what will "
            "I have in {years} years?",
            "{amount} at {rate}% compounded {freq} for {years} years",
            "Could you calculate the balance after {years} years on {amount} saved at {rate}% "
            "interest, compounded {freq}?",
            "Compound interest: {amount}, {rate}% a year, compounded {freq}, {years} years. "
            "What's the final balance?",
            "I'm saving {amount} and the bank offers {rate}% a year compounded {freq}. How much "
            "will it be worth in {years} years?",
        ),
        (
            slot("amount", "numbers", "$1,000 / $5,000 / $10,000 / $25,000 / $50,000"),
            slot("rate", "numbers", "2 / 3.5 / 4.25 / 5 / 6"),
            slot("years", "numbers", "3 / 5 / 10 / 15 / 20"),
            toggle("freq", "antonyms", "monthly", "annually"),
        ),
    ),
    Intent(
        "state_pension_rate",
        (
            "How much was the full state pension in {country} in {year}{couple}?",
            "What was the full rate of the state pension in {country} in {year}{couple}?",
            "full state pension {country} {year}{couple}",
            "Could you tell me the full state pension rate in {country} for {year}{couple}?",
            "State pension in {country}, {year}: what did the full amount come to{couple}?",
            "I'm comparing retirement systems. In {year}, how much did the full state pension in "
            "{country} pay{couple}?",
        ),
        (
            slot(
                "country",
                "entities",
                "the UK / Ireland / the Netherlands / New Zealand / Australia / Canada / Denmark",
            ),
            slot("year", "dates", "2020 / 2021 / 2022 / 2023 / 2024 / 2025"),
            toggle("couple", "scope", "", " for a couple"),
        ),
    ),
    Intent(
        "dividend_metric",
        (
            "What was {company}'s {metric} in {year}?",
            "How high was the {metric} of {company} in {year}?",
            "{company} {metric} {year}",
            "Could you tell me {company}'s {metric} for the year {year}?",
            "In {year}, what was the {metric} on {company} stock?",
            "I'm researching dividend stocks. What was the {metric} for {company} in {year}?",
        ),
        (
            slot(
                "company",
                "entities",
                "Apple / Microsoft / Coca-Cola / Johnson & Johnson / Procter & Gamble / PepsiCo / "
                "Verizon / ExxonMobil / Chevron",
            ),
            slot(
                "metric",
                "nouns",
                "annual dividend per share / dividend yield / payout ratio / dividend growth rate",
            ),
            slot("year", "dates", "2018 / 2019 / 2020 / 2021 / 2022 / 2023"),
        ),
    ),
    Intent(
        "phone_plan_cheaper",
        (
            "Is a {first} cheaper than a {second} if I use {data} GB of data a month?",
            "If I use about {data} GB a month, would a {first} cost less than a {second}?",
            "is {first} cheaper than {second} at {data}GB per month",
            "Could you tell me whether a {first} works out cheaper than a {second} for {data} GB "
            "of monthly data?",
            "Phone plans: for {data} GB a month, does a {first} cost less than a {second}?",
            "I'm switching providers and use around {data} GB a month. Would a {first} be "
            "cheaper than a {second}?",
        ),
        (
            slot(
                "first",
                "nouns",
                "prepaid plan / SIM-only plan / handset contract / family plan / student plan",
            ),
            slot(
                "second",
                "nouns",
                "prepaid plan / SIM-only plan / handset contract / family plan / student plan",
            ),
            slot("data", "numbers", "2 / 5 / 15 / 30 / 60 / 100"),
        ),
        roles=("first", "second"),
    ),
    # ---- food and drink ----
    Intent(
        "wine_pairing",
        (
            "Which {colour} wine goes best with {dish}?",
            "What {colour} wine should I serve with {dish}?",
            "{colour} wine pairing for {dish}",
            "Could you recommend a {colour} wine to pair with {dish}?",
            "Wine pairing question: I'm making {dish} and want a {colour}. What should I pour?",
            "Having friends round for {dish} tonight. What {colour} wine would match it?",
        ),
        (
            toggle("colour", "antonyms", "red", "white"),
            slot(
                "dish",
                "nouns",
                "roast lamb / grilled salmon / mushroom risotto / Thai green curry / "
                "beef bourguignon / oysters / margherita pizza / goat's cheese salad",
            ),
        ),
    ),
    Intent(
        "coffee_dose",
        (
            "How many grams of coffee should I use with {water} of water in a {method} for "
            "a {strength} brew?",
            "For a {strength} cup from a {method}, how much ground coffee goes with {water} of "
            "water?",
            "coffee dose for {water} water, {method}, {strength} brew",
            "Could you tell me how much coffee to weigh out for {water} of water in a {method}, "
            "aiming for a {strength} brew?",
            "Brewing with a {method}: how much ground coffee do I need for {water} of water to "
            "get a {strength} cup?",
            "I'm brewing in a {method} with {water} of water and like it {strength}. How much "
            "coffee should I use?",
        ),
        (
            slot("water", "numbers", "250 ml / 350 ml / 500 ml / 750 ml / 1 litre"),
            slot(
                "method",
                "nouns",
                "French press / pour-over cone / moka pot / Chemex / drip coffee machine / "
                "siphon brewer",
            ),
            toggle("strength", "antonyms", "strong", "mild"),
        ),
    ),
    Intent(
        "oven_fan_conversion",
        (
            "A recipe says {temp}°C in a {source} oven. What temperature should I use in a "
            "{target} oven?",
            "What's {temp}°C {source} in a {target} oven?",
            "{temp}°C {source} oven to {target} oven",
            "Could you convert {temp}°C for a {source} oven to the equivalent {target} oven "
            "setting?",
            "Oven conversion: {temp}°C {source}, what is that for a {target} oven?",
            "My recipe was written for a {source} oven at {temp}°C, but mine is a {target} oven. "
            "What should I set it to?",
        ),
        (
            slot("temp", "numbers", "150 / 160 / 170 / 180 / 190 / 200 / 220"),
            slot("source", "nouns", "fan / conventional"),
            slot("target", "nouns", "fan / conventional"),
        ),
        roles=("source", "target"),
    ),
    Intent(
        "cheese_fridge_life",
        (
            "How long does an {state} pack of {cheese} last in the fridge?",
            "How long can I keep {state} {cheese} in the refrigerator?",
            "{state} {cheese} fridge shelf life",
            "Could you tell me how long {cheese} stays good in the fridge if it's {state}?",
            "Cheese storage: how long will {state} {cheese} keep refrigerated?",
            "I found some {state} {cheese} at the back of my fridge. How long does it normally "
            "keep?",
        ),
        (
            toggle("state", "antonyms", "opened", "unopened"),
            slot(
                "cheese",
                "nouns",
                "cheddar / brie / fresh mozzarella / parmesan / feta / blue cheese / "
                "cream cheese / halloumi",
            ),
        ),
    ),
    # ---- cars, bikes, gardens, hobbies ----
    Intent(
        "ev_charging_time",
        (
            "How long does it take to charge a {car} from 10% to {level}% on a {charger}?",
            "Charging a {car} with a {charger}: how long from 10% up to {level}%?",
            "{car} charging time 10-{level}% {charger}",
            "Could you tell me how long a {car} needs on a {charger} to go from 10% to {level}%?",
            "If I plug my {car} into a {charger} at 10%, how long until it reaches {level}%?",
            "I've just bought a {car}. Starting at 10% battery, how long would a {charger} take "
            "to get it to {level}%?",
        ),
        (
            slot(
                "car",
                "entities",
                "Tesla Model 3 / Nissan Leaf / Hyundai Ioniq 5 / Kia EV6 / Volkswagen ID.3 / "
                "BMW i4 / Renault Zoe / Polestar 2",
            ),
            slot(
                "charger",
                "nouns",
                "7 kW home wallbox / 3-pin household socket / 50 kW rapid charger / "
                "150 kW ultra-rapid charger / 22 kW public charger",
            ),
            slot("level", "numbers", "50 / 60 / 70 / 80 / 90 / 100"),
        ),
    ),
    Intent(
        "bike_repair_steps",
        (
            "How do I {task} on my bike{tools}?",
            "What's the right way to {task} on a bicycle{tools}?",
            "how to {task} on a bike{tools}",
            "Could you walk me through how to {task} on a bike{tools}?",
            "Bicycle maintenance: how can I {task}{tools}?",
            "I've never done it before and need to {task} on my bike{tools}. How do I do it?",
        ),
        (
            slot(
                "task",
                "nouns",
                "fix a puncture / adjust the gears / replace the chain / true a buckled wheel / "
                "adjust the brakes / replace the brake cables / straighten a bent derailleur "
                "hanger",
            ),
            toggle("tools", "negation", "", " without any special tools"),
        ),
    ),
    Intent(
        "race_finish_time",
        (
            "If I run at {pace} per {unit}, what will my {race} time be?",
            "What {race} finish time does a {pace} per {unit} pace give?",
            "{pace} min/{unit} pace {race} finish time",
            "Could you work out my {race} time if I hold a pace of {pace} per {unit}?",
            "Pace calculator: {pace} per {unit} over a {race}, what's the finishing time?",
            "I'm training for a {race} and can keep up {pace} per {unit}. What time would I "
            "finish in?",
        ),
        (
            slot("pace", "numbers", "4:30 / 5:00 / 5:30 / 6:00 / 6:45 / 7:15 / 7:45"),
            toggle("unit", "nouns", "kilometre", "mile"),
            slot("race", "nouns", "5K / 10K / half marathon / marathon / 10-mile race / 15K"),
        ),
    ),
    Intent(
        "chess_opening_plans",
        (
            "What are the main plans for {side} in the {opening}?",
            "In the {opening}, what should {side} be aiming for?",
            "{opening} main ideas for {side}",
            "Could you explain the key strategic ideas of the {opening} from {side}'s point of "
            "view?",
            "Chess openings: what is {side} trying to do in the {opening}?",
            "I've started playing the {opening} as {side}. What are the typical plans I should "
            "follow?",
        ),
        (
            toggle("side", "antonyms", "White", "Black"),
            slot(
                "opening",
                "entities",
                "Sicilian Defence / French Defence / Caro-Kann Defence / Ruy Lopez / "
                "Queen's Gambit Declined / King's Indian Defence / London System / Italian Game",
            ),
        ),
    ),
    Intent(
        "repotting_season",
        (
            "Is {season} a good time to repot {plant}{flowering}?",
            "Would {season} be a sensible time to repot {plant}{flowering}?",
            "repot {plant} in {season}{flowering}?",
            "Could you tell me whether it's OK to repot {plant} during {season}{flowering}?",
            "Houseplant care: is it wise to repot {plant} in {season}{flowering}?",
            "I've got {plant} that's outgrowing its pot. Is it OK to repot it in "
            "{season}{flowering}?",
        ),
        (
            slot("season", "dates", "spring / summer / autumn / winter"),
            slot(
                "plant",
                "nouns",
                "an orchid / a peace lily / a Christmas cactus / an African violet / "
                "an anthurium / a bromeliad / a hoya",
            ),
            toggle("flowering", "scope", "", " while it's flowering"),
        ),
    ),
    # ---- study, language, science ----
    Intent(
        "english_usage_variety",
        (
            'Is "{phrase}" correct in {variety} English{register}?',
            'Can I say "{phrase}" in {variety} English{register}?',
            '"{phrase}" acceptable in {variety} English{register}?',
            'Could you tell me whether "{phrase}" is acceptable in {variety} English{register}?',
            '{variety} English usage{register}: is "{phrase}" OK?',
            'I\'m editing a document in {variety} English. Is "{phrase}" acceptable{register}?',
        ),
        (
            slot(
                "phrase",
                "nouns",
                "have gotten / different than / in hospital / at the weekend / "
                "the team are winning / write me soon / I have proven",
            ),
            toggle("variety", "entities", "British", "American"),
            toggle("register", "scope", "", " in formal writing"),
        ),
    ),
    Intent(
        "university_deadline",
        (
            "What's the {level} application deadline for {university} for entry in {year}?",
            "When do {level} applications to {university} close for {year} entry?",
            "{level} application deadline {university} {year}",
            "Could you tell me the date by which I must apply to {university} for {level} study "
            "starting in {year}?",
            "Applying to {university} for the {year} intake: when is the {level} deadline?",
            "I'm hoping to begin {level} study at {university} in {year}. When's the last day "
            "to apply?",
        ),
        (
            toggle("level", "antonyms", "undergraduate", "postgraduate"),
            slot(
                "university",
                "entities",
                "Oxford / Harvard / the University of Toronto / MIT / the LSE / Stanford / "
                "the University of Melbourne / ETH Zurich",
            ),
            slot("year", "dates", "2025 / 2026 / 2027 / 2028"),
        ),
    ),
    Intent(
        "moon_phase_date",
        (
            "What date is the {phase} moon in {month}?",
            "When's the {phase} moon in {month}?",
            "{phase} moon {month} date",
            "Could you tell me which day the {phase} moon falls on in {month}?",
            "Moon phases, {month}: on what date is the {phase} moon?",
            "I'm planning a night of stargazing in {month}. When is the {phase} moon?",
        ),
        (
            toggle("phase", "antonyms", "full", "new"),
            slot(
                "month",
                "dates",
                "January 2026 / March 2026 / June 2026 / August 2026 / October 2026 / "
                "November 2026 / December 2026 / February 2027",
            ),
        ),
    ),
    Intent(
        "metal_reactivity",
        (
            "Is {first} {comparison} reactive than {second}?",
            "Chemistry question: does {first} react {comparison} vigorously than {second}?",
            "{first} {comparison} reactive than {second}?",
            "Could you tell me if {first} is {comparison} reactive than {second} in the "
            "reactivity series?",
            "In the metal reactivity series, is {first} {comparison} reactive than {second}?",
            "I'm revising GCSE chemistry. Would {first} count as {comparison} reactive than "
            "{second}?",
        ),
        (
            slot(
                "first",
                "nouns",
                "potassium / sodium / calcium / magnesium / aluminium / zinc / iron / copper / "
                "silver / gold",
            ),
            slot(
                "second",
                "nouns",
                "potassium / sodium / calcium / magnesium / aluminium / zinc / iron / copper / "
                "silver / gold",
            ),
            toggle("comparison", "antonyms", "more", "less"),
        ),
        roles=("first", "second"),
    ),
)
