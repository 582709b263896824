"""A small English→French phrase grammar with gold word alignments.

Sentences are ``subject verb object .``, their negation (``does not`` → ``ne … pas``), or
``subject is adjective .``. French agrees in gender and number (articles, adjectives, verbs),
puts colour adjectives after the noun ("the red car" → "la voiture rouge") and size adjectives
before it, turns an indefinite object into ``de`` under negation ("does not see a dog" →
"ne voit pas de chien") and elides ``ne est`` to ``n'est``. Every noun and verb starts with a
consonant, so no other elision arises.

Each example is ``(english_tokens, french_tokens, links)`` with links ``(source_index,
target_index)``: "not" links to both "ne" and "pas", "looks for" both to "cherche", and the
English auxiliary "does"/"do" links to nothing (French has no word for it).
"""

from __future__ import annotations

import random

from ..checks import check_non_negative_int, check_seed

# noun: (English singular, English plural, French singular, French plural, gender)
NOUNS = [
    ("cat", "cats", "chat", "chats", "m"), ("dog", "dogs", "chien", "chiens", "m"),
    ("boy", "boys", "garçon", "garçons", "m"), ("rabbit", "rabbits", "lapin", "lapins", "m"),
    ("horse", "horses", "cheval", "chevaux", "m"), ("book", "books", "livre", "livres", "m"),
    ("bike", "bikes", "vélo", "vélos", "m"), ("truck", "trucks", "camion", "camions", "m"),
    ("cake", "cakes", "gâteau", "gâteaux", "m"),
    ("girl", "girls", "fille", "filles", "f"), ("mouse", "mice", "souris", "souris", "f"),
    ("car", "cars", "voiture", "voitures", "f"), ("house", "houses", "maison", "maisons", "f"),
    ("table", "tables", "table", "tables", "f"), ("apple", "apples", "pomme", "pommes", "f"),
    ("flower", "flowers", "fleur", "fleurs", "f"), ("cup", "cups", "tasse", "tasses", "f"),
]
SUBJECT_NOUNS = ["cat", "dog", "boy", "rabbit", "horse", "girl", "mouse"]
# determiner: (English singular, English plural, French masc. sg., fem. sg., plural)
DETERMINERS = [
    ("the", "the", "le", "la", "les"),
    ("a", "some", "un", "une", "des"),
    ("my", "my", "mon", "ma", "mes"),
    ("this", "these", "ce", "cette", "ces"),
]
# adjective: (English, French masc. sg., fem. sg., masc. pl., fem. pl.)
SIZE_ADJECTIVES = [  # before the noun in French too
    ("small", "petit", "petite", "petits", "petites"),
    ("big", "grand", "grande", "grands", "grandes"),
    ("pretty", "joli", "jolie", "jolis", "jolies"),
]
COLOUR_ADJECTIVES = [  # after the noun in French
    ("red", "rouge", "rouge", "rouges", "rouges"),
    ("black", "noir", "noire", "noirs", "noires"),
    ("green", "vert", "verte", "verts", "vertes"),
    ("blue", "bleu", "bleue", "bleus", "bleues"),
    ("white", "blanc", "blanche", "blancs", "blanches"),
    ("grey", "gris", "grise", "gris", "grises"),
]
# verb: (English 3rd sg., English base form, French 3rd sg., French 3rd pl.); a space marks two words
VERBS = [
    ("sees", "see", "voit", "voient"), ("eats", "eat", "mange", "mangent"),
    ("watches", "watch", "regarde", "regardent"), ("finds", "find", "trouve", "trouvent"),
    ("pushes", "push", "pousse", "poussent"), ("carries", "carry", "porte", "portent"),
    ("wants", "want", "veut", "veulent"), ("looks for", "look for", "cherche", "cherchent"),
]

_NOUN = {n[0]: n for n in NOUNS}
_FORM = {("m", False): 0, ("f", False): 1, ("m", True): 2, ("f", True): 3}


class _Builder:
    """Accumulates the two token lists and the links between them."""

    def __init__(self):
        self.en, self.fr, self.links = [], [], []

    def add(self, english: str | None, french: str | None) -> None:
        """Append words on either side; every English word links to every French word added."""
        en = english.split() if english else []
        fr = french.split() if french else []
        for i in range(len(en)):
            for j in range(len(fr)):
                self.links.append((len(self.en) + i, len(self.fr) + j))
        self.en += en
        self.fr += fr


def _noun_phrase(rng: random.Random, b: _Builder, nouns: list[str], negated_object: bool = False):
    """Append a noun phrase; return its (gender, plural) for agreement."""
    eng_sg, eng_pl, fr_sg, fr_pl, gender = _NOUN[nouns[rng.randrange(len(nouns))]]
    plural = rng.randrange(2) == 1
    det_index = rng.randrange(len(DETERMINERS))
    det = DETERMINERS[det_index]
    size = SIZE_ADJECTIVES[rng.randrange(len(SIZE_ADJECTIVES))] if rng.random() < 0.3 else None
    colour = COLOUR_ADJECTIVES[rng.randrange(len(COLOUR_ADJECTIVES))] if rng.random() < 0.4 else None
    if det_index == 1 and plural:
        size = None  # avoid "des petites" vs formal "de petites"
    form = _FORM[(gender, plural)]
    if det_index == 1 and negated_object:
        fr_det = "de"  # "pas de chien", "pas de chiens"
    else:
        fr_det = det[4] if plural else det[2 + (gender == "f")]
    b.add(det[1] if plural else det[0], fr_det)
    if size:
        b.add(size[0], size[1 + form])
    # English: [size] [colour] noun; French: [size] noun [colour]
    start_en = len(b.en)
    colour_en = colour[0] if colour else None
    noun_en = eng_pl if plural else eng_sg
    noun_fr = fr_pl if plural else fr_sg
    if colour:
        b.en += [colour_en, noun_en]
        b.links += [(start_en + 1, len(b.fr)), (start_en, len(b.fr) + 1)]
        b.fr += [noun_fr, colour[1 + form]]
    else:
        b.add(noun_en, noun_fr)
    return gender, plural


def grammar_example(rng: random.Random) -> tuple[list[str], list[str], list[tuple[int, int]]]:
    """One random sentence pair with its links (see the module docstring)."""
    b = _Builder()
    gender, plural = _noun_phrase(rng, b, SUBJECT_NOUNS)
    negated = rng.random() < 0.35
    if rng.random() < 0.25:  # subject is [not] adjective
        adjective = (SIZE_ADJECTIVES + COLOUR_ADJECTIVES)[rng.randrange(len(SIZE_ADJECTIVES) + len(COLOUR_ADJECTIVES))]
        verb_en, verb_fr = ("are", "sont") if plural else ("is", "est")
        i, j = len(b.en), len(b.fr)
        if negated and not plural:  # "is not" → "n'est pas": "is" and "not" both link to "n'est"
            b.en += [verb_en, "not"]
            b.fr += ["n'est", "pas"]
            b.links += [(i, j), (i + 1, j), (i + 1, j + 1)]
        elif negated:  # "are not" → "ne sont pas"
            b.en += [verb_en, "not"]
            b.fr += ["ne", verb_fr, "pas"]
            b.links += [(i + 1, j), (i, j + 1), (i + 1, j + 2)]
        else:
            b.add(verb_en, verb_fr)
        b.add(adjective[0], adjective[1 + _FORM[(gender, plural)]])
    else:
        eng_3sg, eng_base, fr_3sg, fr_3pl = VERBS[rng.randrange(len(VERBS))]
        verb_fr = fr_3pl if plural else fr_3sg
        if negated:  # does not see → ne voit pas
            b.add("do" if plural else "does", None)
            i_not = len(b.en)
            b.en.append("not")
            b.links.append((i_not, len(b.fr)))
            b.fr.append("ne")
            b.add(eng_base, verb_fr)
            b.links.append((i_not, len(b.fr)))
            b.fr.append("pas")
        else:
            b.add(eng_base if plural else eng_3sg, verb_fr)
        _noun_phrase(rng, b, [n[0] for n in NOUNS], negated_object=negated)
    b.add(".", ".")
    return b.en, b.fr, sorted(b.links)


def generate_grammar(num_examples: int = 2500, seed: int = 0):
    """``num_examples`` pairs with distinct English sentences, the same for the same seed (an int)."""
    check_non_negative_int("num_examples", num_examples)
    seed = check_seed("seed", seed)
    rng = random.Random(seed)
    seen, examples = set(), []
    attempts = 0
    while len(examples) < num_examples:
        attempts += 1
        if attempts > 50 * num_examples + 1000:
            raise ValueError(f"could not generate {num_examples} distinct sentences (got {len(examples)})")
        en, fr, links = grammar_example(rng)
        key = " ".join(en)
        if key not in seen:
            seen.add(key)
            examples.append((en, fr, links))
    return examples
