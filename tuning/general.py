"""Requests no tool fits that an assistant answers from what it knows: a short Python
function, a word or phrase in another language, a fact, a term explained. With the agent's
tools offered, the reply is plain text: a tuned model that learnt only calls would look a
coding question up in the knowledge base.

Each entry is (request wordings, answer, the words the answer must hold). The requests say
what to write, never how; the answers are short and correct.
"""
from __future__ import annotations

import random

CODE = {
    "returns the sum of the squares of a list of numbers":
        "def sum_of_squares(numbers):\n    return sum(x * x for x in numbers)",
    "counts the vowels in a string":
        "def count_vowels(text):\n    return sum(1 for c in text.lower() if c in 'aeiou')",
    "checks whether a number is prime":
        "def is_prime(n):\n    if n < 2:\n        return False\n    i = 2\n    while i * i <= n:\n"
        "        if n % i == 0:\n            return False\n        i += 1\n    return True",
    "removes duplicates from a list but keeps the order":
        "def unique(items):\n    seen = set()\n    return [x for x in items if not (x in seen or seen.add(x))]",
    "computes the factorial of n":
        "def factorial(n):\n    result = 1\n    for i in range(2, n + 1):\n        result *= i\n    return result",
    "tells whether a word is a palindrome":
        "def is_palindrome(word):\n    w = word.lower()\n    return w == w[::-1]",
    "returns the n-th Fibonacci number":
        "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
    "flattens a list of lists into one list":
        "def flatten(lists):\n    return [x for inner in lists for x in inner]",
    "counts the words in a sentence":
        "def count_words(sentence):\n    return len(sentence.split())",
    "merges two dictionaries into a new one":
        "def merge(a, b):\n    return {**a, **b}",
    "returns the largest number in a list without using max":
        "def largest(numbers):\n    best = numbers[0]\n    for x in numbers[1:]:\n        if x > best:\n"
        "            best = x\n    return best",
    "converts a temperature from Fahrenheit to Celsius":
        "def to_celsius(f):\n    return (f - 32) * 5 / 9",
}
CODE_ASKS = ("Write a Python function that {task}.", "Can you give me a Python function that {task}?",
             "show me python code that {task}", "I need a small Python function that {task}.",
             "How would I write a function in Python that {task}?")

PHRASES = {   # English -> French, Spanish, German, Italian
    "thank you": ("merci", "gracias", "danke", "grazie"),
    "good night": ("bonne nuit", "buenas noches", "gute Nacht", "buona notte"),
    "see you tomorrow": ("à demain", "hasta mañana", "bis morgen", "a domani"),
    "please": ("s'il vous plaît", "por favor", "bitte", "per favore"),
    "water": ("eau", "agua", "Wasser", "acqua"),
    "friend": ("ami", "amigo", "Freund", "amico"),
    "cat": ("chat", "gato", "Katze", "gatto"),
    "book": ("livre", "libro", "Buch", "libro"),
}
LANGUAGES = ("French", "Spanish", "German", "Italian")
TRANSLATE_ASKS = ("How do you say '{phrase}' in {language}?", "Translate '{phrase}' to {language}, please.",
                  "what's {language} for \"{phrase}\"?", "Give me the {language} word for '{phrase}'.")

FACTS = (
    (("What is the capital of Japan?", "capital of japan?"), "The capital of Japan is Tokyo.", "Tokyo"),
    (("What's the capital city of Canada?",), "Canada's capital is Ottawa.", "Ottawa"),
    (("Which city is the capital of Australia?",), "The capital of Australia is Canberra.", "Canberra"),
    (("What is the capital of Kenya?",), "Nairobi is the capital of Kenya.", "Nairobi"),
    (("How many continents are there?", "how many continents does the world have"),
     "There are seven continents.", "seven"),
    (("At what temperature does water boil at sea level, in Celsius?",),
     "Water boils at 100 degrees Celsius at sea level.", "100"),
    (("How many legs does a spider have?",), "A spider has eight legs.", "eight"),
    (("Who wrote Romeo and Juliet?",), "Romeo and Juliet was written by William Shakespeare.", "Shakespeare"),
    (("What is the largest planet in our solar system?", "biggest planet in the solar system?"),
     "Jupiter is the largest planet in the solar system.", "Jupiter"),
    (("How many minutes are there in a day?",), "A day has 1440 minutes (24 x 60).", "1440"),
    (("Which gas do plants take in from the air to make their food?",),
     "Plants take in carbon dioxide for photosynthesis.", "carbon dioxide"),
)

TERMS = {
    "recursion": "Recursion is when a function solves a problem by calling itself on a smaller part of it.",
    "a compiler": "A compiler is a program that translates source code into machine code or another lower-level form.",
    "a hash function": "A hash function maps data of any size to a fixed-size value, the same input always giving the same value.",
    "an API": "An API is a defined way for one program to ask another for data or actions.",
    "a unit test": "A unit test is a small automated check that one piece of code behaves as expected.",
    "a database index": "A database index is a structure that lets the database find rows by a column's value without scanning the whole table.",
    "latency": "Latency is the time between a request and its response.",
}
TERM_ASKS = ("Explain in one sentence what {term} is.", "What is {term}? Keep it short.",
             "in a sentence, what's {term}?")


def request(rng: random.Random) -> tuple[str, str, str]:
    """(what the user asks, the answer, a word the answer must hold)."""
    kind = rng.choice(["code", "code", "translate", "fact", "term"])
    if kind == "code":
        task = rng.choice(sorted(CODE))
        code = CODE[task]
        name = code.split("(")[0].removeprefix("def ")
        intro = rng.choice(["Here is one:", "Sure:", "For example:"])
        return rng.choice(CODE_ASKS).format(task=task), f"{intro}\n\n```python\n{code}\n```", f"def {name}("
    if kind == "translate":
        phrase, i = rng.choice(sorted(PHRASES)), rng.randrange(len(LANGUAGES))
        word, language = PHRASES[phrase][i], LANGUAGES[i]
        return (rng.choice(TRANSLATE_ASKS).format(phrase=phrase, language=language),
                f"In {language}, '{phrase}' is '{word}'.", word)
    if kind == "fact":
        asks, answer, key = rng.choice(FACTS)
        return rng.choice(asks), answer, key
    term = rng.choice(sorted(TERMS))
    return rng.choice(TERM_ASKS).format(term=term), TERMS[term], TERMS[term].split()[-1].rstrip(".")
