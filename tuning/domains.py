"""The domains the generator's tasks are about: what a user keeps records of, in which fields,
with random values, background text worth filing and preferences worth remembering.

None of them is a domain of the evaluation suites (runtime facts, bugs, lab freezers, a
household budget, travel, books, recipes, experiments, support tickets): the tuned model is
to learn the tools, not the suites' subjects. disjoint.py checks the names.

A Field draws its values: text from a pool (the first field is the record's key and its
values are distinct within a task), whole numbers, quarter amounts (exact in binary, so a
sum in SQLite equals the sum in Python) or dates.
"""
from __future__ import annotations

import datetime
import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Field:
    name: str                       # the column
    kind: str = "text"              # text | int | real | date
    pool: tuple = ()                # text values
    lo: float = 0
    hi: float = 0
    label: str = ""                 # how a user calls it ("mileage")

    @property
    def sql_type(self) -> str:
        return {"text": "TEXT", "date": "TEXT", "int": "INTEGER", "real": "REAL"}[self.kind]

    @property
    def words(self) -> str:
        return self.label or self.name.replace("_", " ")

    def draw(self, rng: random.Random):
        if self.kind == "text":
            return rng.choice(self.pool)
        if self.kind == "int":
            return rng.randint(int(self.lo), int(self.hi))
        if self.kind == "real":
            return rng.randint(int(self.lo * 4), int(self.hi * 4)) / 4
        day = datetime.date(2025, 1, 1) + datetime.timedelta(days=rng.randint(0, 700))
        return day.isoformat()


@dataclass(frozen=True, slots=True)
class Background:
    """A passage worth filing: its text, a question it answers and the value that shows it did.
    Slots: {k} a value of the domain's subject field, {n} 2-40, {m} 100-9000, {p} 5-60."""
    text: str
    question: str
    key: str


@dataclass(frozen=True, slots=True)
class Domain:
    name: str
    things: str                     # "car services": what the records are, in a user's words
    dbs: tuple                      # database names a model might choose
    tables: tuple
    fields: tuple                   # the first is the key
    say: str                        # one record in a user's words, from its fields
    measure: str                    # the numeric field to add up and compare
    backgrounds: tuple = ()
    prefs: tuple = ()               # things a user prefers, to remember
    topic: str = ""                 # the field whose values background text is about (default: the key)

    @property
    def key(self) -> Field:
        return self.fields[0]

    @property
    def subject(self) -> Field:
        return self.field(self.topic) if self.topic else self.key

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)


def F(name, kind="text", *pool, lo=0, hi=0, label=""):
    return Field(name, kind, tuple(pool), lo, hi, label)


def B(text, question, key):
    return Background(text, question, key)


DOMAINS: tuple[Domain, ...] = (
    Domain("car-maintenance", "car services", ("garage", "car", "vehicle"), ("services", "maintenance", "car_jobs"),
           (F("job", "text", "oil change", "brake pads", "tyre rotation", "timing belt", "air filter", "battery swap",
              "wiper blades", "coolant flush", "spark plugs", "wheel alignment"),
            F("mileage", "int", lo=5000, hi=190000, label="odometer reading"), F("cost", "real", lo=30, hi=900),
            F("done_on", "date", label="date")),
           "{job} at {mileage} km on {done_on}, cost {cost}", "cost",
           (B("The workshop guarantees its {k} work for {n} months or {m} km, whichever comes first.",
              "How long is the workshop's guarantee on {k} work?", "{n} months"),
            B("Winter tyres should go on once night temperatures stay below {n} degrees for a week.",
              "When should the winter tyres go on?", "{n} degrees")),
           ("synthetic oil", "the garage on Elm Road", "appointments before 9 am")),
    Domain("plant-care", "houseplants", ("plants", "greenhouse", "jungle"), ("plants", "watering", "houseplants"),
           (F("plant", "text", "monstera", "fiddle leaf fig", "snake plant", "pothos", "calathea", "string of pearls",
              "peace lily", "jade plant", "bird of paradise", "staghorn fern"),
            F("water_every_days", "int", lo=2, hi=21, label="watering interval in days"),
            F("pot_cm", "int", lo=8, hi=40, label="pot size in cm"), F("room", "text", "kitchen", "hallway", "study",
                                                                       "bedroom", "balcony", "bathroom")),
           "the {plant} in the {room}, watered every {water_every_days} days, pot {pot_cm} cm", "pot_cm",
           (B("Repot a {k} every {n} months in spring, into a pot at most {m} millimetres wider.",
              "How often should the {k} be repotted?", "{n} months"),
            B("Fertilise leafy plants every {n} days from April to September at a quarter strength.",
              "How often should leafy plants be fertilised?", "{n} days")),
           ("rain water for the ferns", "terracotta pots", "watering on Sunday evenings")),
    Domain("gym-workouts", "lifts", ("gym", "training", "lifting"), ("lifts", "workouts", "sets"),
           (F("exercise", "text", "back squat", "deadlift", "bench press", "overhead press", "barbell row",
              "pull up", "hip thrust", "lunge", "front squat", "dip"),
            F("weight_kg", "real", lo=10, hi=220, label="weight in kg"), F("reps", "int", lo=1, hi=15),
            F("session", "date", label="date")),
           "{exercise}: {reps} reps at {weight_kg} kg on {session}", "weight_kg",
           (B("For a {k}, add {p} percent load only after {n} clean sessions at the current weight.",
              "When should I add load to the {k}?", "{n} clean sessions"),
            B("Rest {n} seconds between heavy sets and {m} seconds between light accessory sets.",
              "How long should I rest between heavy sets?", "{n} seconds")),
           ("training in the evening", "free weights over machines", "a deload every fifth week")),
    Domain("music-practice", "practice sessions", ("practice", "music", "studio"), ("sessions", "practice_log", "pieces"),
           (F("piece", "text", "Clair de Lune", "Gymnopedie No. 1", "Fur Elise", "Maple Leaf Rag", "Prelude in C",
              "Moonlight Sonata", "The Entertainer", "Canon in D", "Nocturne Op. 9", "Arabesque No. 1"),
            F("minutes", "int", lo=10, hi=120), F("tempo_bpm", "int", lo=50, hi=180, label="tempo"),
            F("practised_on", "date", label="date")),
           "{piece} for {minutes} minutes at {tempo_bpm} bpm on {practised_on}", "minutes",
           (B("My teacher says to practise {k} hands separately at {n} bpm before joining them.",
              "What tempo did the teacher suggest for {k}?", "{n} bpm"),
            B("Warm up with scales for {n} minutes, then play the hardest passage {m} times slowly.",
              "How long should the scale warm-up last?", "{n} minutes")),
           ("practising before breakfast", "a metronome with a wood-block sound", "lessons on Thursdays")),
    Domain("server-fleet", "servers", ("fleet", "infra", "servers"), ("hosts", "servers", "machines"),
           (F("host", "text", "atlas-01", "atlas-02", "boreal-7", "cobalt-3", "delta-db", "ember-12", "fjord-5",
              "granite-9", "harbor-2", "ion-4"),
            F("cores", "int", lo=4, hi=128), F("ram_gb", "int", lo=8, hi=1024, label="memory in GB"),
            F("rack", "text", "R1", "R2", "R3", "R4", "R7", "R9")),
           "{host} in rack {rack} with {cores} cores and {ram_gb} GB of memory", "cores",
           (B("Hosts in the {k} pool are patched on the {n}th of each month during a {m} second drain window.",
              "When are the {k} pool hosts patched?", "{n}th"),
            B("A disk above {p} percent full pages the on-call engineer after {n} minutes.",
              "When does a full disk page the on-call engineer?", "{p} percent")),
           ("maintenance windows on Tuesday nights", "Debian stable on new hosts", "alerts by SMS")),
    Domain("conference-talks", "talks", ("conference", "talks", "events"), ("talks", "sessions", "schedule"),
           (F("speaker", "text", "Amara Osei", "Bjorn Lindqvist", "Chiara Romano", "Dmitri Volkov", "Elena Sato",
              "Farid Haddad", "Greta Novak", "Hiro Tanaka", "Ines Duarte", "Jonas Weber"),
            F("title", "text", "Scaling Postgres", "Rust in Production", "Edge Caching", "Green Compute",
              "Type Systems Today", "Zero Trust Basics", "Streaming Joins"),
            F("room", "text", "Hall A", "Hall B", "Room 101", "Room 204", "Auditorium"),
            F("minutes", "int", lo=15, hi=60, label="length in minutes")),
           "{speaker} on {title} in {room}, {minutes} minutes", "minutes",
           (B("Speakers should send slides to the programme desk {n} hours before their slot; {k} asked for a clicker.",
              "When are slides due at the programme desk?", "{n} hours"),
            B("The venue's wifi allows {n} devices per badge and the keynote hall seats {m} people.",
              "How many people does the keynote hall seat?", "{m} people")),
           ("aisle seats", "the vegetarian lunch", "talks after 10 am")),
    Domain("garden-harvest", "harvests", ("garden", "allotment", "harvest"), ("harvests", "crops", "pickings"),
           (F("crop", "text", "courgette", "runner beans", "cherry tomatoes", "beetroot", "kale", "rhubarb",
              "garlic", "sweetcorn", "strawberries", "broad beans"),
            F("grams", "int", lo=100, hi=6000, label="weight in grams"), F("bed", "text", "north bed", "south bed",
                                                                          "raised bed", "polytunnel", "fruit cage"),
            F("picked_on", "date", label="date")),
           "{grams} g of {crop} from the {bed} on {picked_on}", "grams",
           (B("Sow {k} again after {n} weeks so the harvest keeps coming; space rows {m} mm apart.",
              "When should the {k} be sown again?", "{n} weeks"),
            B("The allotment society lends the rotavator for {n} days at a deposit of {m} pence.",
              "How long can the rotavator be borrowed?", "{n} days")),
           ("no-dig beds", "heritage seeds", "watering at dawn")),
    Domain("vet-visits", "vet visits", ("pets", "vet", "animals"), ("visits", "vet_visits", "checkups"),
           (F("pet", "text", "Biscuit", "Pepper", "Mochi", "Ziggy", "Luna", "Otis", "Clementine", "Rufus", "Nala",
              "Waffles"),
            F("reason", "text", "vaccination", "dental check", "limp", "ear infection", "annual check",
              "skin rash", "microchip"),
            F("fee", "real", lo=25, hi=480), F("visit_day", "date", label="date")),
           "{pet} went in for a {reason} on {visit_day}, the fee was {fee}", "fee",
           (B("After a {k}, the clinic wants a follow-up within {n} days and no bathing for {m} hours.",
              "When does the clinic want a follow-up after a {k}?", "{n} days"),
            B("The clinic's emergency line answers after hours; night visits add a surcharge of {p} percent.",
              "How much is the night surcharge at the clinic?", "{p} percent")),
           ("the clinic on Birch Lane", "grain-free food", "morning appointments"), topic="reason"),
    Domain("home-repairs", "repairs", ("house", "repairs", "home"), ("repairs", "fixes", "jobs"),
           (F("repair", "text", "leaking tap", "cracked tile", "sticking door", "broken gutter", "loose banister",
              "dripping shower", "faulty socket", "draughty window", "squeaky floorboard"),
            F("trade", "text", "plumber", "electrician", "carpenter", "roofer", "handyman", "glazier"),
            F("price", "real", lo=20, hi=1500), F("fixed_on", "date", label="date")),
           "the {repair}, fixed by the {trade} on {fixed_on} for {price}", "price",
           (B("The {k} repair carries a {n} month guarantee if the invoice number is quoted.",
              "How long is the guarantee on the {k} repair?", "{n} month"),
            B("The building's water main shuts off at the valve under the stairs, {n} turns clockwise.",
              "How do I shut off the water main?", "{n} turns")),
           ("tradespeople who send a quote first", "paying by bank transfer", "work on weekdays")),
    Domain("vocabulary", "words", ("vocab", "language", "words"), ("words", "vocabulary", "flashcards"),
           (F("word", "text", "aufwachen", "bibliotheca", "mariposa", "sorriso", "gezellig", "hygge", "tsundoku",
              "saudade", "komorebi", "wanderlust", "fernweh", "sobremesa"),
            F("language", "text", "German", "Spanish", "Italian", "Dutch", "Japanese", "Portuguese", "Danish"),
            F("meaning", "text", "to wake up", "butterfly", "smile", "cosy togetherness", "longing",
              "sunlight through leaves", "after-dinner talk"),
            F("times_seen", "int", lo=1, hi=40, label="times reviewed")),
           "{word} ({language}) means {meaning}, reviewed {times_seen} times", "times_seen",
           (B("Review a new word after 1, {n} and {m} days; drop it once recalled {p} times in a row.",
              "When should a new word be reviewed?", "{n}"),
            B("The course's level test needs {m} known words and a listening score of {p} percent.",
              "How many words does the level test need?", "{m}")),
           ("example sentences over definitions", "reviewing on the train", "audio cards")),
    Domain("bike-rides", "rides", ("cycling", "rides", "bike"), ("rides", "routes", "cycling_log"),
           (F("route", "text", "river loop", "hill climb", "canal path", "coast road", "forest trail",
              "commute", "lake circuit", "ridge route"),
            F("km", "real", lo=5, hi=160, label="distance in km"), F("climb_m", "int", lo=0, hi=2500,
                                                                   label="climbing in metres"),
            F("ridden_on", "date", label="date")),
           "the {route}, {km} km with {climb_m} m of climbing on {ridden_on}", "km",
           (B("Tyre pressure for the {k} is {n} psi at the front and {m} psi at the back... for gravel, {p} psi.",
              "What tyre pressure should I run on the {k}?", "{n} psi"),
            B("Replace the chain once it stretches {p} tenths of a percent, about every {m} km.",
              "When should the chain be replaced?", "{m} km")),
           ("riding clipless", "routes without main roads", "starting before 7 am")),
    Domain("wine-cellar", "bottles", ("cellar", "wine", "bottles"), ("bottles", "cellar", "wines"),
           (F("wine", "text", "Rioja Reserva", "Barolo", "Chablis", "Malbec", "Riesling Spatlese", "Chianti Classico",
              "Pinot Noir", "Gruner Veltliner", "Syrah", "Albarino"),
            F("vintage", "int", lo=1995, hi=2023), F("bottles", "int", lo=1, hi=24, label="number of bottles"),
            F("rack", "text", "top rack", "middle rack", "bottom rack", "wooden crate", "fridge")),
           "{bottles} bottles of {wine} {vintage} in the {rack}", "bottles",
           (B("The merchant says the {k} will drink well for {n} more years if kept at {p} degrees.",
              "How long will the {k} keep?", "{n} more years"),
            B("Open older reds {n} minutes before dinner and decant them off the sediment.",
              "How early should older reds be opened?", "{n} minutes")),
           ("dry whites", "the merchant on Quay Street", "half bottles for weeknights")),
    Domain("board-games", "game results", ("games", "boardgames", "game_night"), ("scores", "plays", "results"),
           (F("player", "text", "Priya", "Tomasz", "Leila", "Marcus", "Yuki", "Sven", "Odette", "Kwame", "Rosa",
              "Ilya"),
            F("game", "text", "Carcassonne", "Azul", "Wingspan", "Catan", "Ticket to Ride", "Splendor",
              "Terraforming Mars", "Cascadia"),
            F("points", "int", lo=12, hi=180), F("played_on", "date", label="date")),
           "{player} scored {points} at {game} on {played_on}", "points",
           (B("House rule for {k}: a tie goes to the player with fewer turns, and games stop after {n} minutes.",
              "What is the house rule for a tie in {k}?", "fewer turns"),
            B("Game night is every {n} days; the host keeps snacks under {m} calories a bowl.",
              "How often is game night?", "{n} days")),
           ("cooperative games", "playing at Rosa's flat", "games under an hour"), topic="game"),
    Domain("course-grades", "grades", ("school", "grades", "courses"), ("grades", "marks", "courses"),
           (F("course", "text", "Linear Algebra", "Organic Chemistry", "Microeconomics", "Art History",
              "Statistics II", "Data Structures", "Thermodynamics", "Ethics"),
            F("grade", "int", lo=40, hi=100, label="mark"), F("credits", "int", lo=2, hi=10),
            F("term", "text", "autumn 2025", "spring 2026", "summer 2026", "autumn 2026")),
           "{course} in {term}: mark {grade}, {credits} credits", "grade",
           (B("A resit of {k} is allowed within {n} weeks, capped at a mark of {p}.",
              "What is the cap on a resit of {k}?", "{p}"),
            B("Honours need an average mark of {p} over at least {m} credits.",
              "What average do honours need?", "{p}")),
           ("morning lectures", "studying in the library", "handwritten notes")),
    Domain("invoices", "invoices", ("billing", "invoices", "accounts"), ("invoices", "bills_out", "billing"),
           (F("client", "text", "Northwind Studio", "Bluefin Labs", "Oakridge Dental", "Pixel Foundry",
              "Quarry Coffee", "Redwood Legal", "Saffron Media", "Tidewater Farms"),
            F("number", "text", "A-1042", "A-1043", "A-1051", "B-207", "B-212", "C-9001", "C-9017", "D-330"),
            F("amount", "real", lo=80, hi=9500), F("due", "date", label="due date")),
           "invoice {number} to {client} for {amount}, due {due}", "amount",
           (B("{k} pays by bank transfer within {n} days and asks for the PO number on every invoice.",
              "How quickly does {k} pay?", "{n} days"),
            B("Late invoices get a reminder after {n} days and a fee of {p} percent after {m} days.",
              "When does a late invoice get a reminder?", "{n} days")),
           ("invoices as PDF", "net 30 terms", "sending invoices on Mondays")),
    Domain("shipments", "shipments", ("logistics", "shipping", "parcels"), ("shipments", "parcels", "deliveries"),
           (F("tracking", "text", "ZX4471", "KP2093", "MM7710", "QT5580", "LW3316", "HB9024", "RC6647", "VN1185"),
            F("carrier", "text", "Parcelwise", "SwiftPost", "Blue Courier", "Northline", "Coastal Freight"),
            F("weight_kg", "real", lo=0.25, hi=40, label="weight in kg"), F("sent_on", "date", label="date")),
           "parcel {tracking} with {carrier}, {weight_kg} kg, sent {sent_on}", "weight_kg",
           (B("{k} holds undelivered parcels at the depot for {n} days before returning them.",
              "How long does {k} hold undelivered parcels?", "{n} days"),
            B("Parcels over {n} kg need a second handler and a surcharge of {m} pence.",
              "When does a parcel need a second handler?", "{n} kg")),
           ("tracked delivery", "drop-off lockers", "collection after 4 pm"), topic="carrier"),
    Domain("bird-sightings", "sightings", ("birds", "birding", "sightings"), ("sightings", "birds", "log"),
           (F("species", "text", "kingfisher", "red kite", "goldcrest", "little egret", "nuthatch", "lapwing",
              "barn owl", "stonechat", "curlew", "siskin"),
            F("count", "int", lo=1, hi=60, label="how many"), F("place", "text", "the marsh", "the reservoir",
                                                               "Hollow Wood", "the estuary", "the park"),
            F("seen_on", "date", label="date")),
           "{count} {species} at {place} on {seen_on}", "count",
           (B("The {k} nests from April; keep at least {m} metres away and visit no more than {n} times a season.",
              "How far should I stay from a {k} nest?", "{m} metres"),
            B("The reserve's hide opens {n} minutes after sunrise; tide tables matter above {p} percent cover.",
              "When does the reserve's hide open?", "{n} minutes after sunrise")),
           ("early morning walks", "the 10x42 binoculars", "quiet hides over open trails")),
    Domain("podcasts", "episodes", ("podcasts", "listening", "audio"), ("episodes", "podcasts", "queue"),
           (F("show", "text", "Deep Field", "Night Shift Notes", "The Long Game", "Byte Size", "Field Recordings",
              "Slow History", "Quiet Science"),
            F("episode", "int", lo=1, hi=400), F("minutes", "int", lo=8, hi=180, label="length in minutes"),
            F("rating", "int", lo=1, hi=5)),
           "{show} episode {episode}, {minutes} minutes, rated {rating} out of 5", "minutes",
           (B("{k} publishes every {n} days and keeps its back catalogue free for {m} days.",
              "How often does {k} publish?", "{n} days"),
            B("Listening at 1.{n}x speed saves about {p} percent of the time.",
              "How much time does faster listening save?", "{p} percent")),
           ("episodes under an hour", "listening while walking", "interview shows")),
    Domain("medication-schedule", "medications", ("meds", "health", "pharmacy"), ("medications", "doses", "meds"),
           (F("medicine", "text", "ibuprofen", "vitamin D", "amoxicillin", "loratadine", "omeprazole",
              "magnesium", "iron tablets", "folic acid"),
            F("dose_mg", "int", lo=5, hi=1000, label="dose in mg"), F("times_a_day", "int", lo=1, hi=4),
            F("start_day", "date", label="start date")),
           "{medicine}, {dose_mg} mg, {times_a_day} times a day from {start_day}", "dose_mg",
           (B("Take {k} with food and keep {n} hours between doses; the pharmacist said no more than {m} mg a day.",
              "How long should I wait between doses of {k}?", "{n} hours"),
            B("The pharmacy refills a repeat prescription within {n} working days of the request.",
              "How long does a repeat prescription refill take?", "{n} working days")),
           ("tablets over capsules", "a reminder at 8 am", "the pharmacy near the station")),
    Domain("aquarium", "tank readings", ("aquarium", "tank", "fishroom"), ("readings", "water_tests", "tank_log"),
           (F("tank", "text", "reef tank", "shrimp tank", "community tank", "quarantine tank", "nano tank",
              "pond"),
            F("ph", "real", lo=6, hi=8.5, label="pH"), F("nitrate_ppm", "int", lo=0, hi=80, label="nitrate"),
            F("tested_on", "date", label="date")),
           "the {tank}: pH {ph}, nitrate {nitrate_ppm} ppm on {tested_on}", "nitrate_ppm",
           (B("Change {p} percent of the {k} water every {n} days and match the temperature within {m} tenths.",
              "How often should the {k} water be changed?", "{n} days"),
            B("Feed shrimp every {n} days; remove food left after {m} minutes.",
              "How often should the shrimp be fed?", "{n} days")),
           ("live plants", "a quiet filter", "testing on Saturday mornings")),
    Domain("running-races", "races", ("running", "races", "athletics"), ("races", "results", "runs"),
           (F("race", "text", "harbour 10k", "city half", "park 5k", "trail 15k", "midnight 10k", "river relay",
              "winter cross-country"),
            F("minutes", "real", lo=15, hi=150, label="finish time in minutes"),
            F("position", "int", lo=1, hi=900), F("raced_on", "date", label="date")),
           "the {race} in {minutes} minutes, place {position}, on {raced_on}", "minutes",
           (B("The {k} closes entries {n} days before the start and caps the field at {m} runners.",
              "When does entry for the {k} close?", "{n} days"),
            B("Taper for {n} days before a half and cut weekly distance by {p} percent.",
              "How long is the taper before a half?", "{n} days")),
           ("racing in the morning", "cushioned shoes", "negative splits")),
    Domain("photo-shoots", "shoots", ("photos", "studio", "shoots"), ("shoots", "bookings", "sessions"),
           (F("client", "text", "Harlow family", "Mendes wedding", "Kato portraits", "Brightside Bakery",
              "Nilsen headshots", "Okafor christening", "Dunmore gallery"),
            F("photos", "int", lo=20, hi=900, label="photos delivered"), F("fee", "real", lo=90, hi=3200),
            F("shot_on", "date", label="date")),
           "the {client} shoot on {shot_on}, {photos} photos, fee {fee}", "fee",
           (B("The {k} wants prints at {n} by {m} millimetres and the gallery online for {p} days.",
              "How long should the {k} gallery stay online?", "{p} days"),
            B("Back up raw files to two drives within {n} hours of a shoot.",
              "When should raw files be backed up?", "{n} hours")),
           ("natural light", "the 35mm lens", "golden-hour sessions")),
    Domain("beekeeping", "hive inspections", ("apiary", "bees", "hives"), ("inspections", "hives", "hive_log"),
           (F("hive", "text", "Hive Amber", "Hive Basil", "Hive Clover", "Hive Dandelion", "Hive Elder",
              "Hive Foxglove", "Hive Gorse"),
            F("frames_brood", "int", lo=0, hi=12, label="frames of brood"), F("honey_kg", "real", lo=0, hi=35,
                                                                              label="honey in kg"),
            F("inspected_on", "date", label="date")),
           "{hive} with {frames_brood} frames of brood and {honey_kg} kg of honey on {inspected_on}", "honey_kg",
           (B("Treat {k} for mites when the count passes {n} per {m} bees, after the honey is off.",
              "When should {k} be treated for mites?", "{n} per"),
            B("Leave at least {n} kg of stores in each hive for winter.",
              "How much honey should stay in a hive for winter?", "{n} kg")),
           ("inspecting on warm afternoons", "the smoker with pine needles", "local queens")),
)

BY_NAME = {d.name: d for d in DOMAINS}
