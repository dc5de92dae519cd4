"""How users word each intent: several phrasings in different registers, filled from a
record's values, with an occasional typo in the template's own words (never in a value).
None of this text comes from the evaluation suites; disjoint.py checks every run."""
from __future__ import annotations

import random
import re

KEEP = (
    "{records}. Please store these so I can query them later.",
    "can you log these {things} for me: {records}",
    "Start a record of my {things}. So far: {records}.",
    "I want a proper table of {things}. Entries: {records}.",
    "{records} -- save all of that as {things} records, thanks",
    "Track my {things} in a database please. First entries: {records}.",
    "Here are some {things} worth keeping: {records}. File them as rows, not as notes.",
    "Note down these {things} in sqlite: {records}",
    "I'm tracking {things}. Make a table and put these in: {records}.",
    "For my records -- {records}. Can you save them properly so I can ask questions about them later?",
    "pls keep a log of {things}, starting with {records}",
    "Set up somewhere to hold my {things} and enter {records}.",
    "jot these down for me: {records}",
    "{records}. Write these down somewhere, please.",
    "Don't let me lose these {things}: {records}.",
    "Make a record of this: {records}.",
    "Could you hang on to these numbers? {records}.",
    "Hold on to these {things} somewhere I can pull the exact values back out: {records}.",
    "{records} -- log those for me, I'll want to compare them later",
    "i need to keep tabs on my {things}. first batch: {records}. store them so i can look things up",
    "Please register the following {things}, one row per entry: {records}.",
    "It'd help if you kept these in a little database so I can total them up later: {records}.",
    "Would you put these {things} away in a table? {records}.",
    "{records}. Save them exactly as written -- I'll be asking about the numbers.",
    "enter these into a new table: {records}",
    "Record these {things} with every detail, so I can filter and sort them later: {records}.",
    "Can you start a database for my {things}? Begin with {records}.",
    "store {records}",
    "For later comparisons, keep these figures in a structured way: {records}.",
    "Please save these {things} as rows in SQLite: {records}.",
    "{records} -- that's my {things} so far. Keep them where I can query them.",
)
ADD = (
    "Another one: {records}. Add it to the list.",
    "add {records} too",
    "One more for the {things}: {records}.",
    "Please also record {records}.",
    "Put this in with the others: {records}.",
    "New entry: {records}.",
    "I have another of my {things} to log: {records}.",
    "{records} as well, please.",
    "and jot down {records} too",
    "Include {records} with the rest.",
    "log {records} as well",
    "Got another for you: {records}. Same table, please.",
    "Could you append {records} to my {things}?",
    "Store this one alongside the earlier entries: {records}.",
    "{records} -- add that to the {things} too",
    "Please enter {records} into the table with the others.",
    "oh, and {records}. record that one too",
    "Here's a late addition to the {things}: {records}.",
)
UPDATE = (
    "Correction: the {field} for {key} should be {new}, not {old}. Update it.",
    "I got {key} wrong, the {field} is actually {new}. fix it pls",
    "Change the {field} of {key} to {new}.",
    "Small mistake earlier: {key} has {field} {new} (I said {old}). Please correct the record.",
    "Please update {key}: the {field} is now {new}.",
    "oops, {key} should have {field} {new}, not {old}",
    "Set the stored {field} of {key} to {new}.",
    "The {field} I gave you for {key} was off -- make it {new}.",
    "can you amend {key}? {field} should read {new}",
    "Replace {old} with {new} as the {field} of {key}, please.",
    "It'd help if you corrected {key}'s {field} to {new}; {old} was a typo.",
    "update: {key}, {field} {new}",
    "I misread my notes -- for {key} the {field} is {new}, not {old}. Can you change the row?",
    "Revise the entry for {key} so its {field} says {new}.",
)
UPDATE_UNNAMED = (  # the field left out: the old value says which one
    "{key} is off: {old} should have been {new}.",
    "wrong number for {key}: it's {new}, not {old}",
    "{key}: {new} rather than {old}, sorry. Correct it please.",
    "I said {old} for {key} but it was {new}. Can you fix the record?",
    "Mistake on my side -- {key} should be {new} instead of {old}.",
)
DELETE = (
    "Remove {key} from the {things}, that entry was a mistake.",
    "delete the {key} record please",
    "Take {key} off the list of {things}.",
    "Scratch {key}, it shouldn't be stored.",
    "Please drop the row for {key}.",
    "{key} doesn't belong in there -- delete it.",
    "Get rid of {key}, I logged it by accident.",
    "Can you erase {key} from my {things}?",
    "remove {key} from the table",
    "I no longer want {key} among the stored {things}. Take it out, please.",
    "It'd help if you deleted the {key} entry; it never should have gone in.",
    "{key} was wrong from the start. Remove that entry from the database.",
)
QUERY = {
    "sum": ("What is the total {measure} over all the {things} you stored?",
            "add up the {measure} of every entry, what do you get",
            "Sum the {measure} across my {things}, please.",
            "total {measure} of all my {things}?",
            "What do the stored {measure} values come to altogether?",
            "Could you run a sum of the {measure} over everything in the table?",
            "I need the overall {measure} for the {things} I gave you -- query it, don't add it in your head.",
            "Give me the grand total of {measure} from the database.",
            "If you add the {measure} of each stored entry together, what's the figure?"),
    "count": ("How many {things} are stored now?",
              "count the {things} in the table for me",
              "How many entries do my {things} have at this point?",
              "how many {things} have I got on record?",
              "What's the number of rows in the {things} table by now?",
              "Count my stored {things}, please.",
              "Tell me how many {things} the database holds at the moment.",
              "number of {things} on file so far?"),
    "max": ("Which entry has the highest {measure}? Use the stored {things}.",
            "Find the {things} record with the largest {measure}.",
            "what's the top {measure} among the {things} in the database",
            "Which of my {things} has the biggest {measure}? Check the table.",
            "highest {measure} among the stored {things}?",
            "Query the {things} for the maximum {measure} and tell me which entry has it.",
            "Of the {things} you stored, which one leads on {measure}?"),
    "min": ("Which of the stored {things} has the lowest {measure}?",
            "Look for the smallest {measure} in my {things}.",
            "lowest {measure} in the {things} table?",
            "Which of my {things} has the least {measure}? Ask the database.",
            "Find the minimum {measure} among the stored {things}, and which one it belongs to.",
            "Query my {things} for the one with the smallest {measure}."),
    "avg": ("What's the average {measure} across the {things} in the table?",
            "Compute the mean {measure} of my stored {things}.",
            "average {measure} of the {things}?",
            "Give me the mean {measure} over all the {things} in the database.",
            "Could you average the {measure} across the stored {things}?",
            "What does the {measure} of my {things} come to on average, going by the table?"),
    "latest": ("Which of my {things} comes last by {measure}? Check the table.",
               "of the stored {things}, which is the later one going by {measure}?",
               "Which entry has the most recent {measure}? Look it up.",
               "Query my {things}: which one is furthest ahead in {measure}?"),
    "earliest": ("Which of my {things} comes first by {measure}? Check the table.",
                 "of the stored {things}, which is the earliest going by {measure}?",
                 "Which entry has the oldest {measure}? Look it up.",
                 "Query my {things}: which one is soonest by {measure}?"),
    "above": ("Which {things} have a {measure} above {threshold}? Query the table.",
              "list the entries with {measure} over {threshold}",
              "Show me every stored entry whose {measure} is more than {threshold}.",
              "any {things} with {measure} greater than {threshold}? check the table",
              "Query the rows where the {measure} exceeds {threshold}.",
              "Which of my {things} go beyond {threshold} in {measure}?"),
}
LOOKUP = (
    "Check the database again: what is the {field} of {key}?",
    "Look it up in the table once more please -- the {field} for {key}?",
    "Can you query the stored {things} and tell me the {field} of {key}? I want the stored value, not your memory.",
    "double-check in sqlite: {key}, what {field}?",
    "Please verify against the records what {field} {key} has.",
    "Go back to the table and read me the {field} stored for {key}.",
    "What does the database say the {field} of {key} is? Query it, please.",
    "pull up {key} from the database -- what's its {field}?",
    "Look up {key} in my stored {things} and give me the {field}.",
    "Could you confirm the {field} of {key} from the table?",
    "I want the exact {field} of {key} as stored. Query it.",
    "Read back the {field} for {key} from the records, please.",
    "what {field} does the table have for {key}? check it",
    "Verify {key}'s {field} in the database for me.",
    "Before I rely on it: what {field} is on record for {key}? Check the stored row.",
    "Query the {things} table for {key} and tell me its {field}.",
    "just to be sure, look up the stored {field} of {key}",
)
LOOKUP_WHICH = (   # a stored record picked out by one of its values
    "Which of my {things} has {field} {value}? Check the table.",
    "Look it up in the database: which one has {field} {value}?",
    "which entry is the one with {field} {value}? query it please",
    "From the stored {things}, which has {value} as its {field}?",
    "Find the record whose {field} is {value} -- which one is it?",
    "Query the table: the one with {field} {value}, which is it?",
)
WHICH_ONE = (      # asked about records just told: the one with this value
    "which one has {field} {value}?",
    "which of them has {field} {value}?",
    "which is the one with {field} {value}?",
    "which one did I give {field} {value}?",
)
FROM_CONVERSATION_WHICH = (
    "Remind me, which one did I say had {field} {value}?",
    "Quick one: which of them has {field} {value}, going by what I told you?",
    "which was the one with {field} {value} again?",
    "From what I said earlier, which one gets {field} {value}?",
)
MENTION = (        # records told with a question about them, nothing asked to be kept (yet)
    "{records}. Of those, {question}",
    "some context first: {records}. {question}",
    "Here's where things stand -- {records}. {question}",
    "Looking at today's {things}: {records}. {question}",
    "{records}. Not asking you to save anything yet, just: {question}",
    "Thinking out loud about my {things}: {records}. So {question}",
    "Given {records}, {question}",
    "so I have {records} -- {question}",
    "A few {things} from this week: {records}. Tell me, {question}",
    "Here is what I've got: {records}. Quick question: {question}",
    "Consider these: {records}. {question}",
    "My {things} right now are {records}. Based on that, {question}",
)
KEEP_THOSE = (      # the records of an earlier message, now to be kept
    "Now put those {things} into a table so the numbers can be looked up precisely.",
    "ok, save the {things} from my last message as rows please",
    "Could you store the entries I just listed in the database?",
    "Please record those {things} properly; I'll need the exact figures again.",
    "file away the {things} I mentioned, one row each",
    "Okay, hold on to those {things} somewhere I can pull exact values from later.",
    "Log those in a table, please, with every detail.",
    "Save what I just told you as {things} records, so I can query them.",
    "can you put those into the database, one row per entry?",
    "Store the ones above with their exact values; I'll look them up later.",
    "Those {things} -- keep them properly, I'll want to ask about the numbers.",
    "Now enter the {things} from before into a table.",
    "Let's keep those. Database, please, all fields.",
    "It'd help if you logged the {things} I listed, so I can compare them later.",
    "Hang on to those {things} in a structured way, every value as I gave it.",
    "register those entries in sqlite please",
    "Write the {things} from my previous message into a table I can query.",
    "keep those {things} for me, exact figures and all",
    "Please track the {things} I just described, each as its own row.",
    "Put those {count} {things}, {field} included, in a table for later.",
    "keep those {count} with their {field}, exactly as I said them",
    "Those {count} entries and their {field}: store them, I will be asking about them.",
    "Save the {count} {things} above, including the {field} of each, as rows.",
    "Right, now make a record of the {count} {things} and each one's {field}.",
)
FROM_CONVERSATION = (
    "Remind me, what {field} did I give for {key}?",
    "Quick one: the {field} of {key} was what?",
    "What {field} did I say {key} had?",
    "sorry, what was {key}'s {field}?",
    "Earlier I told you the {field} for {key} -- what was it?",
    "What {field} did I mention for {key} a moment ago?",
    "{key} -- what {field} did I give you just now?",
    "I forget, which {field} did I say for {key}?",
    "Can you repeat the {field} I mentioned for {key}?",
    "lost track: what was the {field} I said for {key}?",
    "What did I tell you the {field} of {key} was?",
    "From what I said earlier in this chat, what's {key}'s {field}?",
    "Going back to what I wrote: the {field} for {key}?",
)
FILE = (
    'Put this into the knowledge base for later: "{passage}"',
    'File this as background text: "{passage}"',
    'Keep this paragraph in the knowledge base, it is reference material: "{passage}"',
    'store this text, I will want to search it some day -> "{passage}"',
    'Add to the knowledge base, word for word: "{passage}"',
    'Here is some reference text for the knowledge base; keep it exactly: "{passage}"',
    'save this passage for later lookups: "{passage}"',
    'Please add this document to the knowledge base: "{passage}"',
    '"{passage}" -- add that to the knowledge base, please.',
    'can you keep this background so it can be searched later? "{passage}"',
    'Save this snippet as a document I can search: "{passage}"',
    'here is a bit of background to index for search: "{passage}"',
    'I read this and want it searchable later -- "{passage}"',
    'Ingest this text into the knowledge base verbatim: "{passage}"',
    'Keep this on file as reference (knowledge base, not a table): "{passage}"',
    'Would you put this into the knowledge base? "{passage}"',
    'Reference material for later, file it with the exact wording: "{passage}"',
    'It\'d help to have this in the docs you can search: "{passage}"',
    'background reading to store: "{passage}"',
    'Add this paragraph to your documents so I can look it up by topic: "{passage}"',
)
FILE_CHECK = (      # after filing, a search the user asks for, to see the text come back
    "Afterwards, look it up with a search to confirm it's there.",
    "Then run a knowledge-base search and show me it turns up.",
    "Once it's in, search for it so I know it can be found.",
    "and check with a search afterwards that it comes back",
    "After filing it, do a quick search to prove it's retrievable.",
)
FILE_AS = (         # the user names the source the text is filed under
    'Add this to the knowledge base as "{source}": "{passage}"',
    'File this text under the source name {source}: "{passage}"',
    'Put "{passage}" into the knowledge base, source {source}.',
    'Store this as document "{source}" in the knowledge base: "{passage}"',
)
SEARCH = (
    "{question} Search the knowledge base.",
    "Look in the knowledge base: {question}",
    "{question} It should be in the text I filed.",
    "search the docs you stored -- {question}",
    "I filed something about this earlier. {question}",
    "Can you find it in the knowledge base? {question}",
    "What does the knowledge base say? {question}",
    "{question} Check the background I gave you.",
    "quick search of the filed texts please: {question}",
    "{question} Look it up in what I saved as reference.",
    "Could you search your documents for this: {question}",
    "Answer from the texts I filed: {question}",
    "{question} Don't guess -- search the knowledge base.",
    "i think the reference text covers this. {question}",
    "Pull up the passage that answers this: {question}",
    "{question} (you have background on it)",
    "Going by the reference material: {question}",
    "{question} find it in the docs",
)
NOTE_PREF = (
    "Remember for next time that I prefer {pref}.",
    "Make a memory note: I like {pref}.",
    "please save to your memory that I prefer {pref}",
    "For future conversations, note that I'd rather have {pref}.",
    "Keep in mind from now on: I prefer {pref}. Save that to memory.",
    "Remember that I prefer {pref}.",
    "Please keep a memory note: my preference is {pref}.",
    "I always go for {pref} -- remember that for later sessions.",
    "Save this preference to memory: {pref}.",
    "For the future, I'd like {pref}. Put that in your memory.",
    "It'd help if you remembered that I prefer {pref}.",
    "add to your notes: i prefer {pref}",
    "Could you make a note in memory that I favour {pref}?",
    "One thing about me worth remembering: I prefer {pref}.",
    "note my preference for {pref}, please, so you know next time",
)
# How a user states a liking or a dislike, and how a note keeps it: (verb after I/we, after he/she).
# A note keeps the user's relation (an allergy stays an allergy, a dislike a dislike), not "prefers".
RELATIONS = (("prefer", "prefers"), ("like", "likes"), ("love", "loves"), ("dislike", "dislikes"),
             ("can't stand", "can't stand"), ("want to avoid", "wants to avoid"), ("always go for", "always goes for"),
             ("don't want", "doesn't want"), ("never pick", "never picks"))
SUBJECTS = (("I", "The user", 1), ("I", "The user", 1), ("we", "The user's household", 1),
            ("my sister", "The user's sister", 3), ("my manager", "The user's manager", 3))
NOTE_STATEMENT = (  # {stmt}: "I dislike X", "my partner can't stand X"
    "Remember for next time that {stmt}.",
    "Make a memory note: {stmt}.",
    "please save to your memory that {stmt}",
    "Keep in mind from now on: {stmt}. Save that to memory.",
    "It'd help if you remembered that {stmt}.",
    "add to your notes: {stmt}",
    "One thing worth remembering for later sessions: {stmt}.",
    "For future conversations, note this down: {stmt}.",
)
NOTE_STATEMENT_WHERE = (
    "Remember that {stmt}, and also where you put the {things}.",
    "For later sessions, keep a note that {stmt}, and of which database has my {things}.",
    "Put in a memory note that {stmt} and where my {things} are stored.",
    "remember two things for next time: {stmt}, and which table has the {things}",
    "Note in memory: {stmt}. In the same note, say where the {things} are.",
)
RECALL_ABOUT = (    # a recall worded for any relation, not only a preference
    "What did I ask you to remember about me? Check your notes.",
    "search your memory: what did I tell you about my likes and dislikes?",
    "Anything in your notes about what I want or don't want?",
    "remind me what you noted about me, from your memory",
)

NOTE_WHERE = (
    "Jot down in your memory where the {things} live now.",
    "Save a note in memory about where you put my {things}, so you can find them next time.",
    "write yourself a reminder (memory) of which database holds the {things}",
    "Make a memory note of where my {things} are stored.",
    "Remember where the {things} table is, for next time.",
    "note in memory which database and table the {things} went into",
    "Leave a note in your memory with the location of my {things}.",
    "Please remember which table holds my {things}.",
    "Write down in memory where you stored the {things}, database and table.",
    "For future sessions, keep a note of where my {things} are kept.",
    "it'd help if you noted (in memory) where the {things} are",
    "Save a reminder for yourself in memory: the place my {things} are stored.",
)
IN_NAMED_TABLE = (   # the user names where a keep goes: the gold uses those names
    "{request} Use the table {table} in the database {db}.",
    "{request} Put them in SQLite: database {db}, table {table} ({columns}).",
    "{request} The table should be called {table}, with columns {columns}, in a database named {db}.",
    "{request} Database {db}, table {table}, please.",
    "{request} Name the database {db} and the table {table}.",
)
NAMED_DBS = ("main", "personal", "work_db", "mine", "home_data", "shared", "team", "archive_db")
NAMED_TABLES = ("entries", "items", "log", "list_1", "records", "t1", "tracker", "my_rows", "facts_table")
PAIRED = (         # two records told in one sentence, as a story: still two rows
    "first {a}, and then {b}",
    "{a}; after that, {b}",
    "{a}, and the other one is {b}",
    "one is {a}, the second {b}",
    "{a} -- then later {b}",
)
SET_FIELD = (      # one value of a record given as an instruction
    "make it {value}", "mark it as {value}", "set the {field} to {value}", "put it down as {value}",
    "and the {field} is {value}", "{field}: {value}, please",
)
TEXT_KINDS = (     # what a user may call a passage they file: (one, several)
    ("tip", "tips"), ("piece of advice", "advice"), ("rule", "rules"), ("guideline", "guidelines"),
    ("warning", "warnings"), ("instruction", "instructions"), ("reminder from the manual", "manual notes"),
    ("policy", "policies"), ("hint", "hints"),
)
FILE_KIND = (
    'Keep this {kind} in the knowledge base: "{passage}"',
    'here is a {kind} I want to be able to search later: "{passage}"',
    'File this {kind} as reference text: "{passage}"',
    '"{passage}" -- that {kind} goes into the knowledge base, please.',
    'Put this {kind} somewhere searchable (the knowledge base): "{passage}"',
)
NOTE_WHERE_NAMED = (  # where every store in use holds what, the filed texts called what the user called them
    "Jot down in memory where my {things} ended up and where the {texts} went.",
    "Save a memory note saying where the {things} are and where the {texts} are.",
    "for next session, remember where you put the {things} and the {texts}",
    "Please leave a memory note on where to find both the {things} and the {texts}.",
    "Write yourself a reminder of where the {things} and those {texts} are stored.",
)
NOTE_DICTATED = (   # the user words the note: {fact} in the first person
    "Put a note in memory that {fact}.",
    "Write a memory note stating that {fact}.",
    "remember this for next time, as a memory note: {fact}",
    "Add to your memory that {fact}.",
    "Make a memory note with exactly this: {fact}.",
)
NOTE_WHERE_ALL = (  # where every store in use holds what
    "Leave yourself a memory note of where everything lives: the {things} and the background text.",
    "Write a reminder in memory saying which store has the {things} and which has the reference text.",
    "note for next time (memory): where did the {things} go, and where did the passages go?",
    "Save a memory note that tells you, next session, where to look for each kind of thing I gave you.",
    "Save a memory note on where the {things} and the filed text each ended up.",
    "remember for next time: where the {things} are, and where the reference text is",
    "Keep a memory note of where everything went -- {things} and background alike.",
    "Please note in memory which store holds the {things} and which holds the passages I gave you.",
    "Before we stop, record in your memory where you kept the {things} and the background.",
    "Leave a reminder in memory pointing to the {things} table and the filed documents.",
    "I'll be back later; note in memory where to find the {things} and the text.",
    "Make a memory entry listing where my {things} live and where the reference material lives.",
)
NOTE_PREF_WHERE = (  # a preference and the table's place in one note
    "Remember that I prefer {pref}, and also where you put the {things}.",
    "save to memory: my preference for {pref}, plus the place the {things} are stored",
    "For later sessions, keep a note that I like {pref} and of which database has my {things}.",
    "Put in a memory note that I prefer {pref} and where my {things} are stored.",
    "remember two things for next time: I like {pref}, and which table has the {things}",
    "Save my preference ({pref}) to memory, along with where the {things} are kept.",
    "Note in memory: I'd rather have {pref}. In the same note, say where the {things} are.",
    "For next time, remember {pref} is what I prefer, and where my {things} live.",
    "Keep one memory note with my preference for {pref} and the location of my {things}.",
)
NOTE_AVOID = (      # a constraint on the records, to remember: none with this value
    "Remember for later: I don't want any {things} whose {field} is {value}.",
    "Please note in your memory that {value} is out for me -- no {things} with {field} {value}.",
    "save to memory: skip {things} with {field} {value}, I'm avoiding that",
    "From now on, leave out anything with {field} {value}. Make a note of it.",
    "Keep a note for future sessions: {field} {value} doesn't work for me.",
    "I've had enough of {value} ({field}). Remember that, please.",
    "note this down for later: {value} as {field} is a no-go for us",
)

NOTE_AVOID_ITEM = (  # a constraint on an item a record's list may hold (the field not always named)
    "Please remember for later that {value} is out for us: nothing whose {field} include it.",
    "save to memory: we can't have {value} -- skip any {things} with it in the {field}",
    "Note for the future: I react badly to {value}, so avoid {things} that contain it.",
    "Make a note that {value} must never be in anything you pick from my {things}.",
    "Keep in your memory that my partner can't have {value}.",
    "one more thing to remember: no {value} for us, ever.",
)

CHOOSE = (          # a pick among the stored records, honouring what the notes rule out
    "Which of my {things} would you suggest right now? Take into account anything you've noted about me.",
    "Pick one of my {things} for me -- and mind what I told you before.",
    "what would you recommend from my {things}? check your notes about me first",
    "Help me choose among the {things} I have stored. Don't forget what I asked you to remember.",
    "Which {things} are still an option for me, given what you remember?",
    "Hi again. Suggest something from my {things}, respecting what I asked you to note.",
    "I need to decide on one of the {things} I keep. Which fit, going by your notes?",
    "What could I go for today from my {things}? Go by what you've learnt about me.",
    "Which of the {things} I stored would work for us? Think of what I've told you before.",
)

RECALL_PREF = (
    "What did I tell you I prefer? Check your notes.",
    "Do you have a note about my preferences? Look in memory.",
    "search your memory: which preference did I mention?",
    "Remind me what preference I told you about -- check what you saved.",
    "What preference of mine did you save?",
    "check memory: what do I prefer?",
    "Do you know what I like? Look it up in your notes.",
    "What's in your memory about my preferences?",
    "Look at your saved notes -- what did I say I prefer?",
    "remind me of my preference, from your memory",
    "Which preference did I ask you to remember?",
    "Any notes on what I prefer? Search your memory.",
)
NOTE_IN_MESSAGE = (
    'My note says: "{fact}" Going by that note, {question}',
    'From my own notes: "{fact}" -- so {question}',
    'Here is what I wrote down: "{fact}" Based on this, {question}',
    'I jotted this down: "{fact}" So, {question}',
    'Per my own notes ("{fact}"), {question}',
    'note from me: "{fact}" -- {question}',
    'According to what I wrote ("{fact}"), {question}',
    'Reading from my notebook: "{fact}" Given that, {question}',
    'Here is a line from my notes: "{fact}" Using only that, {question}',
)
RECALL_ALL = (
    "Pull it together: the {field} of {key} from the table, what the knowledge base says about this: "
    "{question} and what your memory note says. Tell me where each answer came from.",
    "Three things, and say which store each came from: {key}'s {field} (database), {question} "
    "(knowledge base), and my preference (memory).",
    "I need three answers with their sources. One: what {field} does {key} have? Two: {question} "
    "Three: what did I say I prefer?",
    "Check all your stores for me. {question} What's the {field} of {key}? And which preference did I "
    "give you? Say where each came from.",
    "Gather it all: {key}'s {field} from the database, the knowledge base's answer to this: {question} "
    "and my preference from memory, each with its source.",
    "back again. {question} also the {field} of {key}, and my preference -- label the store for each",
)
RECALL_BOTH = (     # a stored value and a filed passage; the user may not say which store is which
    "{question} And what {field} does {key} have? Say which store each answer came from.",
    "Two things: the {field} of {key}, and this one: {question} Check what you stored for both.",
    "I need {key}'s {field} and the answer to: {question} Tell me where you found each.",
    "{question} Also, what was the {field} of {key}?",
    "hello again. what {field} does {key} have, and {question_lc}",
    "What's the {field} of {key}? And {question_lc}",
    "{question} Plus the {field} stored for {key}, please.",
    "Look both up: {key}'s {field}, and {question_lc} Say where each answer was found.",
    "two quick ones -- {question_lc} and the {field} of {key}?",
    "Back again. I need {key}'s {field}, and also: {question}",
    "Check what you've kept for me: the {field} of {key}, and {question_lc}",
    "Could you find two things? First the {field} on record for {key}; second, {question_lc}",
    "i need the {field} for {key} and the answer to this: {question} mention your sources",
    "{question} And while you're at it, what's {key}'s {field}? Label the store each came from.",
    "Hi. {question} Also, what {field} did {key} have?",
    "From what you stored earlier: what is the {field} of {key}, and {question_lc}",
)
ALL_IN_ONE = (
    "Do it all at once: store {records} as {things} rows, put this text in the knowledge base "
    '("{passage}"), and write a memory note that I prefer {pref}. Then briefly say what you stored.',
    'Three jobs: log {records} in a table; file "{passage}" as background text; remember that I '
    "prefer {pref}. Confirm when done.",
    'Three things in one go: keep {records} as {things} in a table, file "{passage}" in the knowledge base, '
    "and note in memory that I prefer {pref}. Tell me what you did.",
    'please log {records} in the database, add this to the knowledge base: "{passage}" and remember '
    "that I prefer {pref}",
    "A few jobs for you. Rows for my {things}: {records}. Background to file: \"{passage}\" And a memory "
    "note: I prefer {pref}. Summarise afterwards.",
    'Store {records} in SQLite, put "{passage}" into the knowledge base, and save a memory note saying I '
    "prefer {pref}.",
    "Can you handle all of this now? Keep these {things} in a table: {records}. File this text: "
    '"{passage}" Remember that I prefer {pref}.',
)
ALL_IN_ONE_WHERE = (  # several stores in one request, the note to say where each thing went
    'Record {records} in a table, put the following into the knowledge base: "{passage}" -- and then write yourself a '
    "memory note about where you put each. Summarise at the end.",
    "Several jobs: my {things} ({records}) go into SQLite; \"{passage}\" goes into the knowledge base; "
    "and a note in your memory should say where both ended up.",
    'keep {records} in the database, add "{passage}" to the knowledge base, then note down for yourself '
    "where you stored them",
    "Please do three things. 1) Put {records} in a table. 2) File \"{passage}\" as background. 3) Save a "
    "memory note saying which store holds what. Report back briefly.",
    'Can you store {records} as {things}, put "{passage}" into the knowledge base and leave a memory note of '
    "where each one lives? Then tell me what you did.",
)

DOCUMENTS = (
    "Which texts have you filed in the knowledge base so far?",
    "list the documents in the knowledge base",
    "What's in the knowledge base at the moment? Just the names.",
    "What documents have you got in the knowledge base?",
    "show me the list of filed texts",
    "Which sources does the knowledge base hold right now?",
    "list what I've filed so far, titles only",
    "Can you tell me the names of the documents you've stored?",
)
SIMILAR = (
    "{question} Which of these texts answers that best?\n{options}",
    "Rank these by how close they are in meaning to \"{question}\" and give me the best one:\n{options}",
)
KEEP_STATUS = (    # the details runtime_status just reported, kept as a row
    "Keep those details in a table so I have them on record.",
    "save what you just reported about the model, one row in a table",
    "Could you store that setup information somewhere I can look it up later?",
    "Put those details into the database, please, exactly as you found them.",
    "Write that down as a row: everything you just told me about the model.",
    "I'd like a record of this configuration. Make a table for it and add what you found.",
    "log that for me -- model and all -- in a table",
    "Store the details you just looked up, copied exactly.",
    "Please keep a record of this model's details in the database.",
    "hang on to that info, in a table please",
)
KEEP_STATUS_ASKED = (   # only what the user asked about, counted, of all the tool reported
    "Save the {count} things I asked about as one row in a table.",
    "put those {count} answers into the database, exactly as reported",
    "Only what I asked for, please: store those {count} values in a table.",
    "I want those {count} details on record -- a row in SQLite will do.",
    "make a table with the {count} values I asked you for",
)
KEEP_STATUS_NAMED = (
    "Store the {fields} you just found in a table.",
    "save the {fields} as a row, I will want them again",
    "Make a small table with the {fields} from that check, please.",
    "Keep the {fields} on record in the database -- copy them exactly.",
    "could you record the {fields} you reported? a table is fine",
    "Put the {fields} into a new table for me.",
    "I want the {fields} written down somewhere I can query. One row is enough.",
)
KEEP_FIGURE = (     # the value an aggregate query just returned, kept in a summary table
    "Save that figure in a summary table.",
    "keep that {stat} somewhere -- a separate table for summaries is fine",
    "Please record that result as a row of its own, in a new table.",
    "Store the {stat} you just got, so I can look it up later without working it out again.",
    "note that number down in the database, apart from the {things}",
    "Can you keep that as a summary row? Label it so I know what it is.",
    "I want that {stat} on record. Put it in its own table.",
    "log that result for me in a table of figures",
    "Hold on to that {stat}: a little table of summaries will do.",
)
KEEP_FOUND = (      # a value a knowledge-base passage just gave, kept as a row
    "Keep that figure from the passage in a table, please.",
    "save what the knowledge base just told you as a row I can query",
    "Record that in the database so I don't have to search again.",
    "I'd like that value on record. Make a table for facts like this and add it.",
    "store the answer you found, exactly as the text gave it",
    "Could you note that down as a row in a table?",
    "Put that answer in a table of its own for quick lookups.",
)
KEEP_FOUND_SOURCE = (
    "Put that answer into a table, with the document it came from.",
    "Save the answer and its source as a row in a table.",
    "keep that fact in the database, and which document said it",
    "Record what you found and where you found it, in a table.",
    "Make a row of that: the answer, plus the name of the text it was in.",
)
KEEP_MORE = (       # another figure or fact, into the table the last one went to
    "Add that to the same table as the last one.",
    "put that {stat} in with the figure you saved before",
    "Record this one as well, next to the earlier row.",
    "log that one too, same place as before",
    "Keep that {stat} alongside the other, please.",
)
LOOKUP_REPORTED = (  # a kept value read back from its table
    "What {fact} did you save earlier? Read it back from the table.",
    "check the table you made: what's the {fact}?",
    "Look up the stored {fact} for me -- from the database, not from memory.",
    "Which {fact} is on record? Query the table.",
    "Read me the {fact} you kept, as stored.",
    "just to confirm, what {fact} did you write into the table?",
    "Query what you saved: the {fact}, please.",
)
LOOKUP_FOUND = (
    "You saved something from the knowledge base earlier. Read it back from the table: {question}",
    "check the table of facts you made -- {question_lc}",
    "From the row you stored, not the documents: {question}",
    "Look it up in the table you just filled: {question}",
    "{question} Answer from the stored row, please.",
)
RECALL_REPORTED = (  # a kept value and a filed passage at once: the table, not the tool that first said it
    "What {fact} did you save, and {question_lc} Say which store each answer is from.",
    "Two look-ups, please: the {fact} you kept in the database, and this: {question}",
    "{question} And read me the stored {fact} again. Name the source of each answer.",
    "check both once more -- the {fact} on record and {question_lc}",
    "I need the {fact} as you stored it, plus the answer to: {question} Where did each come from?",
    "Look them up again: the saved {fact}, and {question_lc} Tell me the store behind each one.",
    "From what you kept for me: the {fact}? And {question_lc}",
)
GREETING = ("Hello!", "hey there", "Good morning, how are things?", "Hi, are you there?", "Evening!",
            "How are you today?", "hi! what can you help me with?", "hi", "Hello there!", "morning!",
            "Hey, good to see you.", "hiya", "Good afternoon!", "Hello again, hope you're well.",
            "Hi, quick hello before we start.", "Greetings!", "hello, anybody home?")
STATUS = (          # what serves the user: the runtime_status tool, and the details each wording asks for
    ("Which model am I talking to right now, and on which backend?", ("model", "backend")),
    ("what's running you at the moment? model name, backend and context size please", ("model", "backend", "context_length")),
    ("Before we start: tell me the chat model, its backend and its context window.", ("model", "backend", "context_length")),
    ("Check the stack for me -- which model is loaded and how many tokens of context does it take?", ("model", "context_length")),
    ("Are you on the GPU or the CPU? And which model are you?", ("backend", "model")),
    ("what model are you, and what backend are you on?", ("model", "backend")),
    ("Tell me about the runtime: model, backend, context length.", ("model", "backend", "context_length")),
    ("Which LLM is serving this chat, and what backend runs it?", ("model", "backend")),
    ("How big is your context window, and which model is loaded?", ("context_length", "model")),
    ("Quick system check: model id, backend, context size?", ("model", "backend", "context_length")),
    ("I'm curious what's powering you -- which model and which backend?", ("model", "backend")),
    ("Can you report the runtime status? Model, backend and context length, please.", ("model", "backend", "context_length")),
)
INTENT = (          # what the user wants to do, without the data yet: nothing to call
    "Hi! I want to start keeping track of my {things}.",
    "hello, could you help me organise my {things}?",
    "I'm about to give you some {things} to look after. Ready?",
    "Good morning. From now on I'd like you to handle my {things}.",
    "hey, can you be my assistant for {things}?",
    "I'd like you to look after my {things} from now on.",
    "Can you help me keep on top of my {things}?",
    "hey -- I'm going to start logging my {things} with you",
    "Soon I'll send you some {things}. Can you keep them for me?",
    "I want to get organised about my {things}. Where do we start?",
    "Hello! Could you manage my {things} for me?",
)
THANKS = ("Thanks, that's all for now.", "great, cheers", "Perfect, thank you.", "ok bye for now",
          "That's everything, thanks a lot!", "Thanks! Nothing else.", "cheers, that's it", "thanks!",
          "That'll do, thank you.", "Great, that's all.", "thank you, bye", "Much appreciated, that's it.",
          "ok thanks, done for now", "Brilliant, thanks for the help.", "All good, cheers!")
IRRELEVANT = {
    "multiply": ("What is {a} times {b}?", "quick maths: {a} x {b}?", "Multiply {a} by {b} for me.",
                 "{a} * {b}?", "what's {a} multiplied by {b}", "Can you work out {a} times {b}?"),
    "add": ("What's {a} plus {b}?", "add {a} and {b}", "{a} + {b} = ?", "What's the sum of {a} and {b}?"),
    "reverse": ("Spell the word '{word}' backwards.", "reverse the letters of {word}",
                "What is '{word}' spelled in reverse?", "write {word} back to front"),
    "celsius": ("How much is {a} degrees Celsius in Fahrenheit?", "convert {a} C to F",
                "{a} °C in Fahrenheit?", "Convert {a} degrees C to Fahrenheit, please."),
    "count": ("How many letters are in the word '{word}'?", "count the letters in {word}",
              "how long is the word {word}, in letters?", "Count the letters of '{word}' for me."),
    "subtract": ("What is {a} minus {b}?", "{a} - {b} = ?", "Take {b} away from {a}.", "what's {a} take away {b}"),
    "upper": ("Write '{word}' in capital letters.", "uppercase this word: {word}", "{word} in all caps please",
              "Capitalise every letter of '{word}'."),
    "minutes": ("How many minutes are there in {a} hours?", "convert {a} hours to minutes",
                "{a} hours is how many minutes?", "How many minutes make {a} hours?"),
}
WORDS = ("harbour", "lantern", "meadow", "circuit", "granite", "velvet", "orchard", "compass", "thimble")


NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")


def series(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def count_words(n: int) -> str:
    return NUMBERS[n] if n < len(NUMBERS) else str(n)


def typo(rng: random.Random, template: str) -> str:
    """The template with two adjacent letters of one of its own words swapped (never inside a
    {slot}, so the values stay exact)."""
    words = [m for m in re.finditer(r"(?<![{\w])[a-z]{5,}(?![\w}])", template)]
    if not words:
        return template
    m = rng.choice(words)
    i = rng.randrange(1, len(m.group()) - 2)
    w = m.group()
    return template[:m.start()] + w[:i] + w[i + 1] + w[i] + w[i + 2:] + template[m.end():]


def pick(rng: random.Random, templates, typo_rate: float = 0.08, **slots) -> str:
    template = rng.choice(templates)
    if rng.random() < typo_rate:
        template = typo(rng, template)
    return template.format(**slots)
