"""More question intents, for training and calibrating a second-stage model only.

Written on 2026-12-06, after both halves of bench/question_pair_data.py had been measured,
so that a cross-encoder (bench/cross_encoder_torch.py) has more intents to learn from and a
false-hit table can be measured on intents the scoring model never saw (each intent's pairs
are scored by a model trained without that intent: `manage.py cross_encoder_trial`). They
are neither half: the shipped table (caching/evidence.py) is measured on the development
half alone, and none of these intents rewords a held-out one (their topics were chosen
away from the held-out half's). Written from language knowledge alone, as the halves were:
no model, cache or verifier scored any of it before it was fixed here.
"""

from bench.question_pair_data import Intent, slot, toggle

TRAINING_INTENTS: tuple[Intent, ...] = (
    # ---- software, devops, apps ----
    Intent(
        "git_undo_commits",
        (
            "How do I undo the last {count} commits in Git{keep}?",
            "Explain how to undo my last {count} Git commits{keep}.",
            "git undo last {count} commits{keep}",
            "Could you tell me how to roll back the last {count} commits in a Git repo{keep}?",
            "Git: how do I undo my {count} most recent commits{keep}?",
            "I need to undo the last {count} commits I made in Git{keep}, how?",
        ),
        (
            slot("count", "numbers", "2 / 3 / 4 / 5 / 10"),
            toggle("keep", "negation", "", " without losing my changes"),
        ),
    ),
    Intent(
        "firewall_port",
        (
            "How do I {action} port {port} in {firewall}?",
            "Explain how to {action} port {port} using {firewall}.",
            "{action} port {port} {firewall}",
            "Could you tell me how to {action} port {port} with {firewall}?",
            "{firewall}: how do I {action} port {port}?",
            "I need to {action} port {port} on a machine that uses {firewall}, how?",
        ),
        (
            toggle("action", "antonyms", "open", "close"),
            slot("port", "numbers", "22 / 80 / 443 / 3306 / 5432 / 8080 / 25565"),
            slot("firewall", "entities", "ufw / firewalld / iptables / Windows Defender Firewall"),
        ),
    ),
    Intent(
        "spreadsheet_merge_cells",
        (
            "How do I {action} cells in {app}{device}?",
            "Explain how to {action} a range of cells in {app}{device}.",
            "how to {action} cells {app}{device}",
            "Could you tell me how to {action} cells when using {app}{device}?",
            "{app}{device}: how do I {action} cells?",
            "I need to {action} some cells in {app}{device}, how?",
        ),
        (
            toggle("action", "antonyms", "merge", "unmerge"),
            slot("app", "entities", "Excel / Google Sheets / Apple Numbers / Zoho Sheet"),
            toggle("device", "scope", "", " on a phone"),
        ),
    ),
    Intent(
        "database_migration",
        (
            "How do I migrate a database from {source} to {target}{downtime}?",
            "Explain how to move my database from {source} over to {target}{downtime}.",
            "migrate {source} database to {target}{downtime}",
            "Could you tell me how to migrate my data from {source} to {target}{downtime}?",
            "{source} to {target}: how do I migrate a database{downtime}?",
            "I need to switch a database from {source} to {target}{downtime}, how?",
        ),
        (
            slot(
                "source",
                "entities",
                "MySQL / PostgreSQL / SQLite / Microsoft SQL Server / Oracle / MongoDB",
            ),
            slot(
                "target",
                "entities",
                "MySQL / PostgreSQL / SQLite / Microsoft SQL Server / Oracle / MongoDB",
            ),
            toggle("downtime", "negation", "", " without any downtime"),
        ),
        roles=("source", "target"),
    ),
    Intent(
        "photo_library_transfer",
        (
            "How do I move all my photos from {source} to {target}?",
            "Explain how to transfer my whole photo library from {source} to {target}.",
            "move all photos from {source} to {target}",
            "Could you tell me how to get all my pictures out of {source} and into {target}?",
            "{source} to {target}: how do I move my entire photo library?",
            "I need to migrate all my photos from {source} over to {target}, how?",
        ),
        (
            slot(
                "source",
                "entities",
                "Google Photos / iCloud Photos / OneDrive / Dropbox / Amazon Photos / Flickr",
            ),
            slot(
                "target",
                "entities",
                "Google Photos / iCloud Photos / OneDrive / Dropbox / Amazon Photos / Flickr",
            ),
        ),
        roles=("source", "target"),
    ),
    Intent(
        "vscode_shortcut",
        (
            "What's the keyboard shortcut to {action} in VS Code{platform}?",
            "Which keys do I press to {action} in Visual Studio Code{platform}?",
            "vscode shortcut to {action}{platform}",
            "Could you tell me the VS Code hotkey to {action}{platform}?",
            "VS Code{platform}: what's the shortcut to {action}?",
            "I want to {action} in VS Code from the keyboard{platform}, what's the shortcut?",
        ),
        (
            slot(
                "action",
                "nouns",
                "comment out a line / duplicate a line / open the command palette / "
                "format the whole document / select every occurrence of a word / "
                "delete a line / toggle the sidebar / split the editor",
            ),
            toggle("platform", "scope", "", " on a Mac"),
        ),
    ),
    Intent(
        "ssh_key_setup",
        (
            "How do I set up an SSH key for {host}{passphrase}?",
            "Explain how to create an SSH key{passphrase} and add it to my {host} account.",
            "ssh key setup for {host}{passphrase}",
            "Could you walk me through setting up SSH key access to {host}{passphrase}?",
            "{host}: how do I set up SSH key authentication{passphrase}?",
            "I need to connect to {host} over SSH using a key{passphrase}, how?",
        ),
        (
            slot("host", "entities", "GitHub / GitLab / Bitbucket / Azure DevOps / Codeberg"),
            toggle("passphrase", "negation", "", " without a passphrase"),
        ),
    ),
    Intent(
        "iphone_backup",
        (
            "How do I {action} my iPhone with {tool}?",
            "Explain how to {action} an iPhone using {tool}.",
            "{action} iphone with {tool}",
            "Could you tell me how to {action} my iPhone through {tool}?",
            "{tool}: how do I {action} my iPhone?",
            "I need to {action} my iPhone and want to use {tool}, how?",
        ),
        (
            toggle("action", "antonyms", "back up", "restore"),
            slot("tool", "entities", "iCloud / Finder / iTunes / iMazing"),
        ),
    ),
    Intent(
        "delete_duplicate_rows",
        (
            "How do I delete duplicate rows in a {db} table but keep the {which} one?",
            "Explain how to remove duplicate rows from a {db} table, keeping the {which} copy "
            "of each.",
            "{db} delete duplicate rows keep {which}",
            "Could you tell me how to get rid of duplicate rows in {db} while keeping the "
            "{which} row?",
            "{db}: how do I delete duplicates from a table and keep only the {which} entry?",
            "I need to clean out duplicate rows in a {db} table and keep the {which} one of "
            "each, how?",
        ),
        (
            slot(
                "db",
                "entities",
                "PostgreSQL / MySQL / SQLite / SQL Server / Oracle / BigQuery",
            ),
            toggle("which", "antonyms", "oldest", "newest"),
        ),
    ),
    Intent(
        "find_files_by_date",
        (
            "How do I find files modified {rel} {date} on Linux{depth}?",
            "Explain how to list all files last changed {rel} {date} from the Linux command "
            "line{depth}.",
            "linux find files modified {rel} {date}{depth}",
            "Could you tell me the Linux command to find files modified {rel} {date}{depth}?",
            "Linux: how do I search for files with a modification date {rel} {date}{depth}?",
            "I need to find every file that was modified {rel} {date} on a Linux box{depth}, how?",
        ),
        (
            toggle("rel", "antonyms", "before", "after"),
            slot(
                "date",
                "dates",
                "1 January 2024 / 15 March 2023 / 30 June 2022 / 10 October 2024 / "
                "31 December 2021",
            ),
            toggle("depth", "scope", "", " in the current folder only"),
        ),
    ),
    # ---- home, health, cars, pets ----
    Intent(
        "stain_removal",
        (
            "How do I get a {age} {stain} stain out of {item}?",
            "What's the best way to remove a {age} {stain} stain from {item}?",
            "Tell me how to clean a {age} {stain} stain off {item}.",
            "how to remove {age} {stain} stain from {item}",
            "I've got a {age} {stain} stain on {item}. How do I get it out?",
            "Could you tell me how to lift a {age} {stain} stain from {item}?",
        ),
        (
            toggle("age", "antonyms", "fresh", "dried"),
            slot(
                "stain",
                "nouns",
                "red wine / coffee / blood / grass / ink / grease / tomato sauce / lipstick",
            ),
            slot(
                "item",
                "nouns",
                "a cotton shirt / a wool sweater / a silk blouse / a carpet / a suede jacket / "
                "a mattress / a pair of jeans",
            ),
        ),
    ),
    Intent(
        "oil_change_interval",
        (
            "How often should I change the oil in a {car}{driving}?",
            "What's the recommended oil change interval for a {car}{driving}?",
            "Tell me how often a {car} needs an oil change{driving}.",
            "I drive a {car}. How often do I need to change its oil{driving}?",
            "{car}: how often should the oil be changed{driving}?",
            "how often to change oil in a {car}{driving}",
        ),
        (
            slot(
                "car",
                "entities",
                "Toyota Corolla / Honda Civic / Ford F-150 / Volkswagen Golf / BMW 3 Series / "
                "Subaru Outback / Mazda CX-5 / Hyundai Tucson",
            ),
            toggle("driving", "scope", "", " if I mostly drive short trips"),
        ),
    ),
    Intent(
        "child_bedtime",
        (
            "What time should a {age}-year-old go to bed if they wake up at {wake}?",
            "If my {age}-year-old wakes up at {wake}, what time should they go to bed?",
            "bedtime for a {age} year old who wakes up at {wake}",
            "Could you tell me what time a {age}-year-old who gets up at {wake} should go to bed?",
            "{age}-year-old waking up at {wake}: what should their bedtime be?",
            "My child is {age} and wakes up at {wake}. When should they go to bed?",
        ),
        (
            slot("age", "numbers", "2 / 4 / 8 / 15"),
            slot("wake", "numbers", "6 am / 6:30 am / 7 am / 7:30 am / 8 am"),
        ),
    ),
    Intent(
        "puppy_weight",
        (
            "How much should a {breed} puppy weigh at {weeks} weeks?",
            "What's the normal weight for a {weeks}-week-old {breed} puppy?",
            "{breed} puppy weight at {weeks} weeks?",
            "My {breed} puppy is {weeks} weeks old. How much should it weigh?",
            "Could you tell me the typical weight of a {breed} puppy at {weeks} weeks old?",
            "how heavy should a {weeks} week old {breed} puppy be",
        ),
        (
            slot(
                "breed",
                "entities",
                "Labrador Retriever / German Shepherd / Beagle / French Bulldog / Border Collie / "
                "Dachshund / Siberian Husky / Yorkshire Terrier / Great Dane",
            ),
            slot("weeks", "numbers", "8 / 10 / 12 / 16 / 20 / 24"),
        ),
    ),
    Intent(
        "unclog_drain",
        (
            "How do I unclog a {drain}{method}?",
            "What's the best way to unblock a clogged {drain}{method}?",
            "My {drain} is clogged. How can I clear it{method}?",
            "how to unclog {drain}{method}",
            "Tell me how to fix a blocked {drain}{method}.",
            "Could you explain how to clear a clogged {drain}{method}?",
        ),
        (
            slot(
                "drain",
                "nouns",
                "bathroom sink / kitchen sink / shower drain / bathtub / toilet / garbage disposal",
            ),
            toggle("method", "negation", "", " without using chemicals"),
        ),
    ),
    Intent(
        "lawn_weeds",
        (
            "How do I get rid of {weed} in my lawn{method}?",
            "What's the best way to remove {weed} from the lawn{method}?",
            "how to get rid of {weed} in lawn{method}",
            "My lawn is full of {weed}. What can I do about it{method}?",
            "Tell me how to clear {weed} out of my lawn{method}.",
            "Could you tell me how to eliminate {weed} from my lawn{method}?",
        ),
        (
            slot(
                "weed",
                "nouns",
                "dandelions / clover / moss / crabgrass / bindweed / wild violets / thistles",
            ),
            toggle("method", "negation", "", " without any chemicals"),
        ),
    ),
    Intent(
        "paint_over_paint",
        (
            "Can I apply {top} over {bottom}{primer}?",
            "Is it OK to put {top} on top of {bottom}{primer}?",
            "Is it possible to use {top} over {bottom}{primer}?",
            "{top} over {bottom}{primer}: does that work?",
            "can you put {top} over {bottom}{primer}",
            "I want to cover {bottom} with {top}{primer}. Is that possible?",
        ),
        (
            slot(
                "top",
                "nouns",
                "latex paint / oil-based paint / chalk paint / milk paint / epoxy paint / limewash",
            ),
            slot(
                "bottom",
                "nouns",
                "latex paint / oil-based paint / chalk paint / milk paint / epoxy paint / limewash",
            ),
            toggle("primer", "negation", "", " without a primer"),
        ),
        roles=("top", "bottom"),
    ),
    Intent(
        "target_heart_rate",
        (
            "What heart rate should a {age}-year-old aim for during {intensity} exercise?",
            "What's the target heart rate for {intensity} exercise at age {age}?",
            "target heart rate {intensity} exercise {age} year old",
            "I'm {age}. What heart rate should I aim for when doing {intensity} exercise?",
            "Could you tell me the ideal heart rate range for a {age}-year-old doing {intensity} "
            "exercise?",
            "Heart rate for {intensity} exercise at age {age}: what should I aim for?",
        ),
        (
            slot("age", "numbers", "25 / 35 / 45 / 55 / 65 / 75"),
            toggle("intensity", "antonyms", "moderate", "vigorous"),
        ),
    ),
    Intent(
        "hair_washing",
        (
            "How often should I wash {hair}{lifestyle}?",
            "How many times a week should I shampoo {hair}{lifestyle}?",
            "how often to wash {hair}{lifestyle}",
            "I have {hair}. How often should I be washing it{lifestyle}?",
            "What's the ideal washing frequency for {hair}{lifestyle}?",
            "Could you tell me how often {hair} should be washed{lifestyle}?",
        ),
        (
            slot(
                "hair",
                "nouns",
                "oily hair / dry hair / curly hair / coily hair / colour-treated hair / "
                "thinning hair",
            ),
            toggle("lifestyle", "scope", "", " if I work out every day"),
        ),
    ),
    Intent(
        "egg_boiling",
        (
            "How long should I boil {egg} for a {yolk} yolk{start}?",
            "How many minutes does {egg} need to boil to get a {yolk} yolk{start}?",
            "how long to boil {egg} for a {yolk} yolk{start}",
            "I want {egg} with a {yolk} yolk. How many minutes should I boil it{start}?",
            "Could you tell me the boiling time for {egg} with a {yolk} yolk{start}?",
            "Tell me how long to cook {egg} in boiling water for a {yolk} yolk{start}.",
        ),
        (
            slot(
                "egg",
                "nouns",
                "a large hen egg / a medium hen egg / a duck egg / a quail egg / a goose egg",
            ),
            toggle("yolk", "antonyms", "runny", "firm"),
            toggle("start", "scope", "", " if it's straight from the fridge"),
        ),
    ),
    # ---- facts, study, money, law ----
    Intent(
        "born_before",
        (
            "Was {first} born {order} {second}?",
            "Is it true that {first} was born {order} {second}?",
            "Did {first} come into the world {order} {second}?",
            "was {first} born {order} {second} or not",
            "Could you tell me whether {first} was born {order} {second}?",
            "I'm revising for a history quiz. Was {first} born {order} {second}?",
        ),
        (
            slot(
                "first",
                "entities",
                "Leonardo da Vinci / Galileo Galilei / William Shakespeare / Isaac Newton / "
                "Johann Sebastian Bach / Wolfgang Amadeus Mozart / Napoleon Bonaparte / "
                "Charles Darwin / Queen Victoria / Marie Curie",
            ),
            slot(
                "second",
                "entities",
                "Leonardo da Vinci / Galileo Galilei / William Shakespeare / Isaac Newton / "
                "Johann Sebastian Bach / Wolfgang Amadeus Mozart / Napoleon Bonaparte / "
                "Charles Darwin / Queen Victoria / Marie Curie",
            ),
            toggle("order", "antonyms", "before", "after"),
        ),
        roles=("first", "second"),
    ),
    Intent(
        "percentage_of",
        (
            "What percentage of {whole} is {part}?",
            "{part} is what percent of {whole}?",
            "Express {part} as a percentage of {whole}.",
            "how many percent is {part} out of {whole}",
            "Could you work out what percentage {part} is of {whole}?",
            "I'm doing my maths homework: what is {part} as a percentage of {whole}?",
        ),
        (
            slot("part", "numbers", "12 / 45 / 80 / 150 / 320 / 900 / 2,400"),
            slot("whole", "numbers", "12 / 45 / 80 / 150 / 320 / 900 / 2,400"),
        ),
        roles=("part", "whole"),
    ),
    Intent(
        "planet_sun_distance",
        (
            "How far is {planet} from the Sun at its {point}?",
            "What is {planet}'s distance from the Sun when it is {point}?",
            "At its {point} point, how far from the Sun is {planet}?",
            "distance between the sun and {planet} at its {point} point",
            "Could you tell me how far {planet} is from the Sun at its {point} point?",
            "I'm reading about the solar system. How far from the Sun is {planet} when it's at "
            "its {point}?",
        ),
        (
            slot(
                "planet",
                "entities",
                "Mercury / Venus / Earth / Mars / Jupiter / Saturn / Uranus / Neptune",
            ),
            toggle("point", "antonyms", "closest", "farthest"),
        ),
    ),
    Intent(
        "animal_lifespan",
        (
            "How long do {animal} live{setting}?",
            "What is the average lifespan of {animal}{setting}?",
            "Typical lifespan of {animal}{setting}: how many years is it?",
            "how long do {animal} usually live for{setting}",
            "Could you tell me the life expectancy of {animal}{setting}?",
            "I'm writing a school report on {animal}. How long do they live{setting}?",
        ),
        (
            slot(
                "animal",
                "nouns",
                "lions / elephants / orcas / gorillas / giraffes / wolves / bottlenose dolphins / "
                "red pandas / hedgehogs",
            ),
            toggle("setting", "scope", "", " in captivity"),
        ),
    ),
    Intent(
        "landlord_entry",
        (
            "In {region}, can my landlord enter my rented home{notice}?",
            "Is a landlord in {region} allowed to enter a tenant's home{notice}?",
            "can my landlord come into my rental in {region}{notice}",
            "Tenancy law in {region}: may a landlord enter the rented property{notice}?",
            "Could you tell me whether landlords in {region} can enter a rented property{notice}?",
            "I rent a home in {region}. Is my landlord allowed to enter it{notice}?",
        ),
        (
            slot(
                "region",
                "entities",
                "England / Scotland / California / New York State / Ontario / Quebec / Germany / "
                "Ireland",
            ),
            toggle("notice", "negation", "", " without giving notice"),
        ),
    ),
    Intent(
        "players_per_team",
        (
            "How many players does each {sport} team have in play at once{keeper}?",
            "In a game of {sport}, how many players per side are allowed in play at the same "
            "time{keeper}?",
            "Rules of {sport}: how many players does each side field at one time{keeper}?",
            "how many players per team are playing at once in {sport}{keeper}",
            "Could you tell me how many players each team has in play at any one time in a "
            "{sport} match{keeper}?",
            "I'm new to watching {sport}. How many players does each team have in play at "
            "once{keeper}?",
        ),
        (
            slot(
                "sport", "nouns", "football / ice hockey / water polo / futsal / lacrosse / hurling"
            ),
            toggle("keeper", "negation", "", " not counting the goalkeeper"),
        ),
    ),
    Intent(
        "novel_film_adaptations",
        (
            "Which of {author}'s novels {adapted} been adapted into films?",
            "Which novels by {author} {adapted} been made into movies?",
            "List the {author} novels that {adapted} been turned into films.",
            "{author}: which of their novels {adapted} been adapted for the big screen?",
            "Could you tell me which {author} novels {adapted} been made into films?",
            "I'm a big fan of {author}. Which of their novels {adapted} been made into movies?",
        ),
        (
            slot(
                "author",
                "entities",
                "Stephen King / Jane Austen / Charles Dickens / Agatha Christie / "
                "Ernest Hemingway / Toni Morrison / Kazuo Ishiguro / Margaret Atwood / "
                "Thomas Hardy",
            ),
            toggle("adapted", "negation", "have", "haven't"),
        ),
    ),
    Intent(
        "bank_account_documents",
        (
            "What documents do I need to {action} a {account} in {country}{status}?",
            "Which documents are required to {action} a {account} in {country}{status}?",
            "To {action} a {account} in {country}{status}, what paperwork do I need?",
            "documents needed to {action} a {account} in {country}{status}",
            "Could you tell me what documents I need to {action} a {account} in {country}{status}?",
            "I'm planning to {action} a {account} in {country}{status}. What documents will the "
            "bank ask me for?",
        ),
        (
            toggle("action", "antonyms", "open", "close"),
            slot(
                "account",
                "nouns",
                "current account / savings account / joint account / business account / "
                "student account",
            ),
            slot(
                "country",
                "entities",
                "Germany / Spain / the UK / Canada / Japan / the Netherlands / Australia / "
                "Singapore",
            ),
            toggle("status", "scope", "", " as a non-resident"),
        ),
    ),
    Intent(
        "average_salary_in_year",
        (
            "What was the average salary for {job}{sector} in {country} in {year}?",
            "In {year}, how much did {job}{sector} in {country} earn on average?",
            "How much did {job}{sector} in {country} earn on average back in {year}?",
            "average salary of {job}{sector} in {country} in {year}",
            "Could you tell me the average pay of {job}{sector} in {country} in {year}?",
            "I'm researching careers: what did {job}{sector} in {country} earn on average in "
            "{year}?",
        ),
        (
            slot(
                "job",
                "nouns",
                "software engineers / accountants / electricians / pharmacists / architects / "
                "civil engineers / lawyers / data analysts",
            ),
            slot(
                "country",
                "entities",
                "the UK / Germany / Canada / Australia / the US / Ireland / France / Japan",
            ),
            slot("year", "dates", "2005 / 2010 / 2015 / 2020 / 2023"),
            toggle("sector", "scope", "", " in the public sector"),
        ),
    ),
    Intent(
        "boiling_point_altitude",
        (
            "What is the boiling point of {substance} at an altitude of {altitude} metres?",
            "At {altitude} metres above sea level, at what temperature does {substance} boil?",
            "boiling point of {substance} at {altitude} m elevation",
            "Tell me the temperature at which {substance} boils {altitude} metres above sea level.",
            "Could you tell me the boiling point of {substance} at {altitude} metres above sea "
            "level?",
            "I'm doing a chemistry project: what's the boiling point of {substance} at "
            "an elevation of {altitude} metres?",
        ),
        (
            slot("substance", "nouns", "water / ethanol / acetone / methanol / hexane / benzene"),
            slot("altitude", "numbers", "1,000 / 2,500 / 3,500 / 5,000 / 8,000"),
        ),
    ),
)
