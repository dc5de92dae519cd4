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
)
UPDATE = (
    "Correction: the {field} for {key} should be {new}, not {old}. Update it.",
    "I got {key} wrong, the {field} is actually {new}. fix it pls",
    "Change the {field} of {key} to {new}.",
    "Small mistake earlier: {key} has {field} {new} (I said {old}). Please correct the record.",
)
DELETE = (
    "Remove {key} from the {things}, that entry was a mistake.",
    "delete the {key} record please",
    "Take {key} off the list of {things}.",
    "Scratch {key}, it shouldn't be stored.",
)
QUERY = {
    "sum": ("What is the total {measure} over all the {things} you stored?",
            "add up the {measure} of every entry, what do you get",
            "Sum the {measure} across my {things}, please."),
    "count": ("How many {things} are stored now?",
              "count the {things} in the table for me",
              "How many entries do my {things} have at this point?"),
    "max": ("Which entry has the highest {measure}? Use the stored {things}.",
            "Find the {things} record with the largest {measure}.",
            "what's the top {measure} among the {things} in the database"),
    "min": ("Which of the stored {things} has the lowest {measure}?",
            "Look for the smallest {measure} in my {things}.",),
    "avg": ("What's the average {measure} across the {things} in the table?",
            "Compute the mean {measure} of my stored {things}."),
    "above": ("Which {things} have a {measure} above {threshold}? Query the table.",
              "list the entries with {measure} over {threshold}"),
}
LOOKUP = (
    "Check the database again: what is the {field} of {key}?",
    "Look it up in the table once more please -- the {field} for {key}?",
    "Can you query the stored {things} and tell me the {field} of {key}? I want the stored value, not your memory.",
    "double-check in sqlite: {key}, what {field}?",
    "Please verify against the records what {field} {key} has.",
    "Go back to the table and read me the {field} stored for {key}.",
    "What does the database say the {field} of {key} is? Query it, please.",
)
MENTION = (        # records told with a question about them, nothing asked to be kept (yet)
    "{records}. Of those, {question}",
    "some context first: {records}. {question}",
    "Here's where things stand -- {records}. {question}",
    "Looking at today's {things}: {records}. {question}",
)
KEEP_THOSE = (      # the records of an earlier message, now to be kept
    "Now put those {things} into a table so the numbers can be looked up precisely.",
    "ok, save the {things} from my last message as rows please",
    "Could you store the entries I just listed in the database?",
    "Please record those {things} properly; I'll need the exact figures again.",
    "file away the {things} I mentioned, one row each",
)
FROM_CONVERSATION = (
    "Remind me, what {field} did I give for {key}?",
    "Quick one: the {field} of {key} was what?",
    "What {field} did I say {key} had?",
    "sorry, what was {key}'s {field}?",
    "Earlier I told you the {field} for {key} -- what was it?",
)
FILE = (
    'Put this into the knowledge base for later: "{passage}"',
    'File this as background text: "{passage}"',
    'Keep this paragraph in the knowledge base, it is reference material: "{passage}"',
    'store this text, I will want to search it some day -> "{passage}"',
    'Add to the knowledge base, word for word: "{passage}"',
    'Here is some reference text for the knowledge base; keep it exactly: "{passage}"',
    'save this passage for later lookups: "{passage}"',
)
SEARCH = (
    "{question} Search the knowledge base.",
    "Look in the knowledge base: {question}",
    "{question} It should be in the text I filed.",
    "search the docs you stored -- {question}",
    "I filed something about this earlier. {question}",
    "Can you find it in the knowledge base? {question}",
)
NOTE_PREF = (
    "Remember for next time that I prefer {pref}.",
    "Make a memory note: I like {pref}.",
    "please save to your memory that I prefer {pref}",
    "For future conversations, note that I'd rather have {pref}.",
    "Keep in mind from now on: I prefer {pref}. Save that to memory.",
)
NOTE_WHERE = (
    "Jot down in your memory where the {things} live now.",
    "Save a note in memory about where you put my {things}, so you can find them next time.",
    "write yourself a reminder (memory) of which database holds the {things}",
)
NOTE_WHERE_ALL = (  # where every store in use holds what
    "Leave yourself a memory note of where everything lives: the {things} and the background text.",
    "Write a reminder in memory saying which store has the {things} and which has the reference text.",
    "note for next time (memory): where did the {things} go, and where did the passages go?",
    "Save a memory note that tells you, next session, where to look for each kind of thing I gave you.",
)
NOTE_PREF_WHERE = (  # a preference and the table's place in one note
    "Remember that I prefer {pref}, and also where you put the {things}.",
    "save to memory: my preference for {pref}, plus the place the {things} are stored",
    "For later sessions, keep a note that I like {pref} and of which database has my {things}.",
)
RECALL_PREF = (
    "What did I tell you I prefer? Check your notes.",
    "Do you have a note about my preferences? Look in memory.",
    "search your memory: which preference did I mention?",
    "Remind me what preference I told you about -- check what you saved.",
)
RECALL_WHERE = (
    "Where did you keep my {things}? Look at your memory notes.",
    "New day. Check your notes: which database did you use for the {things}?",
)
NOTE_IN_MESSAGE = (
    'My note says: "{fact}" Going by that note, {question}',
    'From my own notes: "{fact}" -- so {question}',
    'Here is what I wrote down: "{fact}" Based on this, {question}',
)
RECALL_ALL = (
    "Pull it together: the {field} of {key} from the table, what the knowledge base says about this: "
    "{question} and what your memory note says. Tell me where each answer came from.",
    "Three things, and say which store each came from: {key}'s {field} (database), {question} "
    "(knowledge base), and my preference (memory).",
)
RECALL_BOTH = (     # a stored value and a filed passage; the user may not say which store is which
    "{question} And what {field} does {key} have? Say which store each answer came from.",
    "Two things: the {field} of {key}, and this one: {question} Check what you stored for both.",
    "I need {key}'s {field} and the answer to: {question} Tell me where you found each.",
    "{question} Also, what was the {field} of {key}?",
    "hello again. what {field} does {key} have, and {question_lc}",
)
ALL_IN_ONE = (
    "Do it all at once: store {records} as {things} rows, put this text in the knowledge base "
    '("{passage}"), and write a memory note that I prefer {pref}. Then briefly say what you stored.',
    'Three jobs: log {records} in a table; file "{passage}" as background text; remember that I '
    "prefer {pref}. Confirm when done.",
)
DOCUMENTS = (
    "Which texts have you filed in the knowledge base so far?",
    "list the documents in the knowledge base",
    "What's in the knowledge base at the moment? Just the names.",
)
SIMILAR = (
    "{question} Which of these texts answers that best?\n{options}",
    "Rank these by how close they are in meaning to \"{question}\" and give me the best one:\n{options}",
)
GREETING = ("Hello!", "hey there", "Good morning, how are things?", "Hi, are you there?", "Evening!",
            "How are you today?", "hi! what can you help me with?")
STATUS = (          # what serves the user: the runtime_status tool
    "Which model am I talking to right now, and on which backend?",
    "what's running you at the moment? model name, backend and context size please",
    "Before we start: tell me the chat model, its backend and its context window.",
    "Check the stack for me -- which model is loaded and how many tokens of context does it take?",
    "Are you on the GPU or the CPU? And which model are you?",
)
INTENT = (          # what the user wants to do, without the data yet: nothing to call
    "Hi! I want to start keeping track of my {things}.",
    "hello, could you help me organise my {things}?",
    "I'm about to give you some {things} to look after. Ready?",
    "Good morning. From now on I'd like you to handle my {things}.",
    "hey, can you be my assistant for {things}?",
)
THANKS = ("Thanks, that's all for now.", "great, cheers", "Perfect, thank you.", "ok bye for now",
          "That's everything, thanks a lot!", "Thanks! Nothing else.", "cheers, that's it")
IRRELEVANT = {
    "multiply": ("What is {a} times {b}?", "quick maths: {a} x {b}?", "Multiply {a} by {b} for me."),
    "add": ("What's {a} plus {b}?", "add {a} and {b}"),
    "reverse": ("Spell the word '{word}' backwards.", "reverse the letters of {word}"),
    "celsius": ("How much is {a} degrees Celsius in Fahrenheit?", "convert {a} C to F"),
    "count": ("How many letters are in the word '{word}'?", "count the letters in {word}"),
    "subtract": ("What is {a} minus {b}?", "{a} - {b} = ?"),
    "upper": ("Write '{word}' in capital letters.", "uppercase this word: {word}"),
    "minutes": ("How many minutes are there in {a} hours?", "convert {a} hours to minutes"),
}
WORDS = ("harbour", "lantern", "meadow", "circuit", "granite", "velvet", "orchard", "compass", "thimble")


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
