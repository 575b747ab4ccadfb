"""An unseen held-out group of question intents (the eighth), for another blind check.

Written on 2026-12-07 from language knowledge alone, after the sealed group had been scored,
by a writer told to run no embedding model, cache or verifier on it: none was run on any of
it before it was fixed here, and nothing in it was tuned to any model's scores. Only the pair
generator (pure string code) was run, to read the pairs it makes. It shares no intent,
template or sentence with the other groups (bench/question_pair_data.py's two halves,
bench/question_pair_training_data.py, bench/question_pair_fresh_data.py,
bench/question_pair_blind_data.py, bench/question_pair_extra_data.py and
bench/question_pair_sealed_data.py): its topics were chosen away from theirs.
"""

from bench.question_pair_data import Intent, slot, toggle

CAREERS = (
    "teaching / nursing / accountancy / software development / graphic design / "
    "project management / policing / law / marketing"
)
TUBE_STATIONS = (
    "King's Cross St Pancras / Oxford Circus / Canary Wharf / Wimbledon / Camden Town / "
    "Stratford / Paddington / Brixton / Bank"
)
MEDIA = "air / water / glass / diamond / ice / olive oil"
NOTES = "C / D / E / F / G / A / B"

UNSEEN_INTENTS: tuple[Intent, ...] = (
    # ---- work and careers ----
    Intent(
        "interview_questions_to_ask",
        (
            "What questions should I ask at the end of a {stage} interview for a {role} job?",
            "Suggest some good questions to put to the interviewer in a {stage} interview for "
            "a {role} role.",
            "questions to ask interviewer {stage} interview {role}",
            "Could you tell me what to ask the interviewers when they finish a {stage} "
            "interview for a {role} position?",
            "Job hunting: which questions are smart to ask back at a {stage} interview for a "
            "{role} post?",
            "I've got a {stage} interview for a {role} job next week. What should I ask them "
            "when it's my turn?",
        ),
        (
            toggle("stage", "antonyms", "first-round", "final-round"),
            slot(
                "role",
                "nouns",
                "software engineer / nurse / primary school teacher / sales manager / "
                "graphic designer / data analyst / pharmacist / project manager / junior lawyer",
            ),
        ),
    ),
    Intent(
        "career_switch",
        (
            "How can I switch careers from {first} to {second}{degree}?",
            "What's the best route out of a career in {first} and into {second}{degree}?",
            "career change {first} to {second}{degree}",
            "Is there a way for someone working in {first} to move into a job in "
            "{second}{degree}? How?",
            "Career advice please: I work in {first} and want to get into {second}{degree}. "
            "Where do I start?",
            "I'm thinking of leaving {first} for {second}{degree}; how do I make the jump?",
        ),
        (
            slot("first", "nouns", CAREERS),
            slot("second", "nouns", CAREERS),
            toggle("degree", "negation", "", " without going back to university"),
        ),
        roles=("first", "second"),
    ),
    # ---- government and local services ----
    Intent(
        "jury_service_excusal",
        (
            "Can I be excused from jury service in {country} if I'm {reason}?",
            "Is being {reason} a valid reason to get out of jury duty in {country}?",
            "jury duty in {country}: excused if {reason}?",
            "Could you tell me whether I can get excused from jury duty in {country} because "
            "I'm {reason}?",
            "Jury summons in {country}: will they let me off if I'm {reason}?",
            "I've been called up for jury service in {country} but I'm {reason}. Can I avoid "
            "serving?",
        ),
        (
            slot(
                "country",
                "entities",
                "England and Wales / Scotland / the US / Australia / Canada / Ireland / "
                "New Zealand",
            ),
            slot(
                "reason",
                "nouns",
                "a full-time student / a full-time carer / self-employed / over 70 / a doctor / "
                "a breastfeeding mother / a police officer / on a pre-booked holiday",
            ),
        ),
    ),
    Intent(
        "report_to_council",
        (
            "How do I report {problem} to the council in {city}{anon}?",
            "What's the way to let {city} council know about {problem}{anon}?",
            "report {problem} {city} council{anon}",
            "Could you tell me how to report {problem} to the council for {city}{anon}?",
            "Local services in {city}: where do I go to report {problem}{anon}?",
            "There's {problem} near my house in {city}. How do I tell the council{anon}?",
        ),
        (
            slot(
                "problem",
                "nouns",
                "a pothole / a broken streetlight / fly-tipping / graffiti / an abandoned car / "
                "a blocked drain / an overflowing public bin / a dead animal on the road",
            ),
            slot(
                "city",
                "entities",
                "Leeds / Manchester / Bristol / Glasgow / Cardiff / Birmingham / Sheffield / "
                "Edinburgh",
            ),
            toggle("anon", "negation", "", " without giving my name"),
        ),
    ),
    # ---- getting around ----
    Intent(
        "transit_item_rules",
        (
            "Can I take {item} on {network}?",
            "Am I allowed to bring {item} onto {network}?",
            "rules for {item} on {network}",
            "Could you tell me whether {item} is permitted on {network}?",
            "Public transport question: is {item} allowed on {network}?",
            "I want to travel on {network} with {item}. Is that OK?",
        ),
        (
            slot(
                "item",
                "nouns",
                "a full-size bike / a folding bike / an e-scooter / a large dog / "
                "an unfolded pushchair / a mobility scooter / a surfboard",
            ),
            slot(
                "network",
                "entities",
                "the London Underground / the Paris Metro / the New York subway / "
                "the Berlin U-Bahn / the Tokyo Metro / the Madrid Metro / the Vienna U-Bahn",
            ),
        ),
    ),
    Intent(
        "tube_route",
        (
            "What's the best way to get from {first} to {second} on the Tube{access}?",
            "How do I travel from {first} to {second} by London Underground{access}?",
            "tube route {first} to {second}{access}",
            "Could you tell me which Tube lines to take from {first} to {second}{access}?",
            "London travel: I'm at {first} and need to reach {second} by Tube{access}. "
            "What's the route?",
            "I need to get to {second} from {first} on the Underground{access}, which way "
            "should I go?",
        ),
        (
            slot("first", "entities", TUBE_STATIONS),
            slot("second", "entities", TUBE_STATIONS),
            toggle("access", "scope", "", " with step-free access"),
        ),
        roles=("first", "second"),
    ),
    # ---- kids and parenting ----
    Intent(
        "explain_to_child",
        (
            "How do I explain {topic} to a {age}-year-old?",
            "What's a simple way to explain {topic} to a child of {age}?",
            "explain {topic} to {age} year old",
            "Could you tell me how to describe {topic} so that a {age}-year-old understands it?",
            "Parenting question: how would you put {topic} into words a {age}-year-old can follow?",
            "My {age}-year-old asked me about {topic} and I'm stuck. How do I explain it?",
        ),
        (
            slot(
                "topic",
                "nouns",
                "photosynthesis / fractions / where rain comes from / why the sky is blue / "
                "how money works / gravity / what electricity is / how the heart pumps blood",
            ),
            slot("age", "numbers", "4 / 6 / 9 / 12 / 15"),
        ),
    ),
    Intent(
        "pocket_money",
        (
            "How much pocket money should I give a {age}-year-old per {period} in {country}?",
            "What's a normal {period}ly allowance for a {age}-year-old in {country}?",
            "pocket money per {period} for a {age} year old in {country}",
            "Could you suggest a sensible amount of pocket money per {period} for a child of "
            "{age} in {country}?",
            "Parenting in {country}: how much should a {age}-year-old get in pocket money each "
            "{period}?",
            "My kid is turning {age} and we live in {country}. How much pocket money a {period} "
            "is about right?",
        ),
        (
            slot("age", "numbers", "5 / 7 / 10 / 12 / 14 / 16"),
            toggle("period", "nouns", "week", "month"),
            slot(
                "country",
                "entities",
                "the UK / the US / Australia / Ireland / Canada / Germany",
            ),
        ),
    ),
    # ---- cooking techniques ----
    Intent(
        "temper_chocolate",
        (
            "How do I temper {kind} chocolate{therm}?",
            "What's the method for tempering {kind} chocolate{therm}?",
            "temper {kind} chocolate{therm}",
            "Could you walk me through tempering {kind} chocolate at home{therm}?",
            "Chocolate work: what are the steps to temper {kind} chocolate{therm}?",
            "I want glossy, snappy {kind} chocolate for dipping. How do I temper it{therm}?",
        ),
        (
            slot("kind", "nouns", "dark / milk / white / ruby"),
            toggle("therm", "negation", "", " without a thermometer"),
        ),
    ),
    Intent(
        "fix_sauce_consistency",
        (
            "How do I fix {sauce} that's too {texture}?",
            "My {sauce} is too {texture}, how can I rescue it?",
            "{sauce} too {texture} fix",
            "Could you tell me how to sort out {sauce} that has turned out too {texture}?",
            "Cooking help: what can I do when {sauce} comes out too {texture}?",
            "I need to correct a pan of {sauce} that's too {texture} before dinner. What should "
            "I do?",
        ),
        (
            slot(
                "sauce",
                "nouns",
                "gravy / cheese sauce / hollandaise / custard / curry sauce / béchamel / "
                "tomato pasta sauce / caramel sauce",
            ),
            toggle("texture", "antonyms", "thick", "thin"),
        ),
    ),
    # ---- software tools ----
    Intent(
        "pdf_merge_split",
        (
            "How do I {action} PDF files on {platform}{upload}?",
            "What's the simplest way to {action} PDFs on {platform}{upload}?",
            "{action} pdf files on {platform}{upload}",
            "Could you tell me how to {action} PDF documents on {platform}{upload}?",
            "PDF tools: how can I {action} some PDFs on {platform}{upload}?",
            "I have to {action} a few PDF files for work on {platform}{upload}. How?",
        ),
        (
            toggle("action", "antonyms", "merge", "split"),
            slot(
                "platform",
                "entities",
                "Windows / a Mac / an iPhone / an Android phone / a Chromebook / Linux",
            ),
            toggle("upload", "negation", "", " without uploading them to a website"),
        ),
    ),
    Intent(
        "recurring_calendar_event",
        (
            "How do I set up a meeting that repeats {freq} in {app}{end}?",
            "What are the steps to create a recurring event {freq} in {app}{end}?",
            "{app} recurring meeting {freq}{end}",
            "Could you tell me how to make a meeting in {app} repeat {freq}{end}?",
            "Calendar help: in {app}, how can I schedule something to recur {freq}{end}?",
            "I run a team check-in {freq} and want {app} to repeat it automatically{end}. How?",
        ),
        (
            slot(
                "freq",
                "nouns",
                "every weekday / every other week / on the first Monday of each month / "
                "on the last Friday of each month / every three weeks / twice a week",
            ),
            slot(
                "app",
                "entities",
                "Google Calendar / Outlook / Apple Calendar / Microsoft Teams / Zoom / Thunderbird",
            ),
            toggle("end", "scope", "", " with an end date"),
        ),
    ),
    # ---- science and maths homework ----
    Intent(
        "polygon_angle",
        (
            "What is the size of each {which} angle of a regular {polygon}?",
            "How many degrees is one {which} angle in a regular {polygon}?",
            "{which} angle regular {polygon}",
            "Could you tell me what each {which} angle of a regular {polygon} measures?",
            "Maths homework: find the {which} angle of a regular {polygon}.",
            "I need to work out one {which} angle of a regular {polygon} for my geometry "
            "homework. What is it?",
        ),
        (
            toggle("which", "antonyms", "interior", "exterior"),
            slot(
                "polygon",
                "nouns",
                "pentagon / hexagon / heptagon / octagon / nonagon / decagon / dodecagon",
            ),
        ),
    ),
    Intent(
        "light_refraction_angle",
        (
            "What is the angle of refraction when light passes from {first} into {second} at "
            "an angle of incidence of {angle} degrees?",
            "Light travels from {first} into {second}, hitting the boundary at {angle}° to the "
            "normal: at what angle is it refracted?",
            "refraction angle {first} to {second} incidence {angle} degrees",
            "Could you tell me the refracted angle for a ray going from {first} into {second} "
            "with an incidence angle of {angle} degrees?",
            "Physics homework: a ray goes from {first} to {second} at {angle}° incidence. Find "
            "the angle of refraction.",
            "Work out the angle of refraction for light entering {second} from {first} at "
            "{angle} degrees to the normal.",
        ),
        (
            slot("first", "nouns", MEDIA),
            slot("second", "nouns", MEDIA),
            slot("angle", "numbers", "5 / 10 / 15 / 20"),
        ),
        roles=("first", "second"),
    ),
    # ---- astronomy ----
    Intent(
        "meteor_shower_peak",
        (
            "When do the {shower} peak in {year}?",
            "Which night will the {shower} meteor shower be at its peak in {year}?",
            "{shower} peak date {year}",
            "Could you tell me when the {shower} meteor shower reaches its maximum in {year}?",
            "Stargazing in {year}: on what date are the {shower} at their peak?",
            "I'm planning to watch the {shower} in {year}. When is their peak night?",
        ),
        (
            slot(
                "shower",
                "entities",
                "Perseids / Geminids / Quadrantids / Leonids / Orionids / Lyrids / "
                "Eta Aquariids / Draconids",
            ),
            slot("year", "dates", "2025 / 2026 / 2027 / 2028 / 2029"),
        ),
    ),
    # ---- music theory ----
    Intent(
        "interval_between_notes",
        (
            "What interval is it from {first} {direction} to {second}?",
            "Name the interval going {direction} from {first} to {second}.",
            "interval {first} {direction} to {second}",
            "Could you tell me what interval you get going from {first} {direction} to {second}?",
            "Music theory: starting on {first} and going {direction} to {second}, what's the "
            "interval called?",
            "I'm doing ear training and need to know the interval from {first} {direction} to "
            "{second}. What is it?",
        ),
        (
            slot("first", "entities", NOTES),
            slot("second", "entities", NOTES),
            toggle("direction", "antonyms", "up", "down"),
        ),
        roles=("first", "second"),
    ),
    # ---- shopping ----
    Intent(
        "tv_size_for_distance",
        (
            "What size {res} TV should I get if I sit {distance} metres from the screen?",
            "How big should a {res} television be for a viewing distance of {distance} metres?",
            "{res} tv size for {distance} m viewing distance",
            "Could you tell me the right screen size for a {res} TV watched from {distance} "
            "metres away?",
            "Shopping for a {res} TV: which screen size suits a sofa {distance} metres from it?",
            "My sofa is {distance} metres from where the TV will go. What size {res} TV should "
            "I buy?",
        ),
        (
            slot("distance", "numbers", "1.5 / 2 / 2.5 / 3 / 3.5 / 4"),
            toggle("res", "nouns", "4K", "1080p"),
        ),
    ),
    # ---- sport rules ----
    Intent(
        "match_duration",
        (
            "How long does a {sport} match last{breaks}?",
            "What's the duration of a {sport} match{breaks}?",
            "{sport} match length{breaks}",
            "Could you tell me how many minutes a {sport} game takes{breaks}?",
            "Sport rules: how long is a game of {sport}{breaks}?",
            "I'm new to {sport}. How long is one match{breaks}?",
        ),
        (
            slot(
                "sport",
                "nouns",
                "netball / rugby union / futsal / basketball / handball / field hockey / "
                "water polo / lacrosse",
            ),
            toggle("breaks", "scope", "", " including the breaks"),
        ),
    ),
    # ---- hobbies: DIY and birdwatching ----
    Intent(
        "sandpaper_grit",
        (
            "What grit sandpaper should I use for the {stage} pass when sanding {surface}?",
            "Which sandpaper grit is right for the {stage} round of sanding on {surface}?",
            "sandpaper grit for {stage} pass on {surface}",
            "Could you tell me which grit of paper to use for the {stage} sanding pass on "
            "{surface}?",
            "DIY: for the {stage} pass over {surface}, what grit should the sandpaper be?",
            "I'm sanding {surface} and I'm on the {stage} pass. Which grit do I need?",
        ),
        (
            toggle("stage", "antonyms", "first", "last"),
            slot(
                "surface",
                "nouns",
                "bare pine / an old varnished table / dried wall filler / car paintwork / "
                "a rusty metal gate / oak flooring / a painted skirting board",
            ),
        ),
    ),
    Intent(
        "bird_migration_timing",
        (
            "When do {birds} {move} the UK?",
            "What month do {birds} usually {move} the UK?",
            "{birds} {move} the UK when",
            "Could you tell me at what time of year {birds} {move} the UK?",
            "Birdwatching: when should I expect {birds} to {move} the UK?",
            "I've started birdwatching and want to know when {birds} {move} the UK each year.",
        ),
        (
            slot(
                "birds",
                "nouns",
                "swallows / swifts / cuckoos / redwings / ospreys / pink-footed geese / "
                "nightingales",
            ),
            toggle("move", "antonyms", "arrive in", "leave"),
        ),
    ),
)
