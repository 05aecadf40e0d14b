"""What kind of thing a proper name names: a person, an organisation, a place, or unknown.

:func:`name_kind` types a name by evidence code can check in the name itself and in ``text``,
the chunk (or letter) it was found in.  It is deliberately strict: ``unknown`` whenever the
evidence is missing or points two ways, so a name typed ``person`` or ``organisation`` is
rarely wrong.  The rules, first match wins:

1. **Parts.**  A name joined by "and"/"&" whose parts are all of one kind is of that kind
   ("Bob Hamman and Sharon Osberg"); of mixed kinds, unknown ("Underwriting and Bill Lyons").
   A possessive or "of" names its head: "Nike's Phil Knight" and "Craig Mundie of Microsoft"
   are persons, "Lou's GEICO" an organisation; when the head alone is unknown the whole name
   is typed ("Bank of America", "Helzberg's Diamond Shops").  A name that starts with a
   function word ("Like Ajit", "Includes Helzberg") is unknown: it is not a name as written.
2. **A fragment of a longer name** is unknown: its first word is not distinctive (see rule
   6) and every place ``text`` writes it, a capitalised word stands right before it, with or
   without "and"/"&" ("Marine Insurance Company" of "National Fire and Marine Insurance
   Company", "Casualty Company" of "Cornhusker Casualty Company").
3. **A person's title** first ("Mr. Robert H. Bird", "Aunt Alice", "President Kennedy") ->
   person.  A role without a name ("Chairman", "CEO of GEICO", "Berkshire's Vice Chairman") ->
   unknown.
4. **A legal form last** (Inc, Corp, Company, Co, Ltd, LLC, PLC, Bancorp, ...) after another
   word -> organisation ("Kaiser Industries, Inc." is written "Kaiser Industries Inc").
5. **An acronym** (GEICO, BNSF) -> organisation, unless it is a common abbreviation of
   English prose (:data:`COMMON_ACRONYMS`: CEO, GAAP, GDP, TV, ...), or ``text`` spells it out
   in lower case before it in brackets ("management by walking around (MBWA)").
6. **An organisation word** (:data:`ORG_WORDS`: Bank, Insurance, Group, Partners, Newspapers,
   Hotel, ...) with at least one *distinctive* word -> organisation.  A distinctive word is
   one that is neither an organisation word nor written in lower case anywhere in ``text``:
   "Scott Fetzer Manufacturing Group" has two, "Insurance Group" and "Shoe Group" none (both
   are the letter's own words for a segment, not a name).
7. **A place**: the name is a listed place (``schemas/place_names.txt``: US states and large
   cities, countries, regions), or a distinctive word followed by a place word ("Fifth
   Avenue", "Sun Valley", "Rosenblatt Stadium", "Westchester County") -> place.
8. **A given name first** (``schemas/given_names.txt``, common English given names, none taken
   from the letters) and two to four capitalised words, none an organisation word -> person
   ("Ken Chace").  A given name alone is a person when ``text`` also writes it followed by a
   surname ("Gene" beside "Gene Abegg").
9. **Context in ``text``**: a title right before the name or its last word ("Mr. Chace") or
   "managed by"/"run by"/"led by" before it -> person; a legal form or organisation word right
   after it ("Time, Inc.", "Cypress Insurance Company" for "Cypress"), "CEO/President/Chairman
   of" before it, or its shares/stock after it -> organisation; ", <listed place>" after it
   ("Miami, Florida") -> place.  Evidence for two kinds -> unknown.
10. Otherwise unknown (a word of prose capitalised as a heading, "Management", "Textile
    Operations"; a table label; a product or an event).

Every list is general English: the same rule runs on letters nobody labelled.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import Literal

from letterchunk.resources import resource_path

__all__ = [
    "NameKind",
    "name_kind",
    "person_like",
    "organisation_like",
    "ORG_WORDS",
    "LEGAL_FORMS",
    "TITLES",
    "ROLE_WORDS",
    "PLACE_WORDS",
    "COMMON_ACRONYMS",
]

NameKind = Literal["person", "organisation", "place", "unknown"]
#: more words than this is a table header or a phrase, not a name
MAX_NAME_WORDS = 6

#: a company's legal form, written after its name
LEGAL_FORMS = frozenset(
    "inc incorporated corp corporation co company companies cos ltd limited llc lp llp plc "
    "ag sa nv gmbh bancorp".split()
)
#: words that, capitalised inside a name, name an institution: the legal forms; the usual
#: nouns of company, financial, public and press names; the business words of shop and
#: hotel names
ORG_WORDS = LEGAL_FORMS | frozenset(
    """group holdings holding partners partnership associates bank banks banking trust fund funds
    insurance assurance indemnity reinsurance underwriters securities investors exchange
    association institute university college foundation council commission agency bureau
    department ministry industries manufacturing mills stores mart airlines airways railroad
    railway communications newspapers newspaper magazine times news post journal tribune herald
    gazette chronicle shops board publishing broadcasting pharmaceuticals laboratories
    enterprises motors hotel hotels inn suites""".split()
)
#: a person's title before the name
TITLES = frozenset(
    "mr mrs ms miss dr sir dame lady lord prof professor president senator governor judge "
    "aunt uncle".split()
)
#: a role: without a person's name beside it, not a name
ROLE_WORDS = frozenset(
    """chairman chairwoman chair vice president ceo cfo coo chief executive officer director
    manager treasurer secretary assistant founder partner""".split()
)
#: the last word of a place name
PLACE_WORDS = frozenset(
    "city county street avenue lane road boulevard square valley stadium centre center "
    "airport island islands beach bay lake mountains harbor".split()
)
#: abbreviations of ordinary prose that are no organisation
COMMON_ACRONYMS = frozenset(
    """ceo ceos cfo coo cio gaap gdp gnp tv iq kwh eps ipo roe roi ebitda dvd dvds cd pc ai it ok
    faq q&a p/c cd-rom usa us uk dc am pm ad bc jr sr ii iii iv""".split()
)
# words that start no name: a name written after them is not a name as written
_LEADING = frozenset(
    """a about after all also although an and any as at because before both but by during each
    either even every for from further he her here his however i if in includes including
    excludes excluding instead into it its like many meanwhile more most my neither no nor not of
    on once only or other our over since so some such than that the their then there these they
    this those though through thus to under unless unlike until we what when where whether which
    while who why with within without yet you your""".split()
)
_CONNECTOR = re.compile(r"\s+(?:and|&)\s+")
_POSSESSIVE = re.compile(r"^(.+?)['\u2019]s\s+(.+)$")
_OF = re.compile(r"^(.+?)\s+of\s+(?:the\s+)?(.+)$")
_PERSON_BEFORE = re.compile(r"\b(?:managed|run|led|headed|founded)\s+by\s+$", re.IGNORECASE)
_ROLE_OF = re.compile(
    r"\b(?:CEO|chief executive|president|chairman|founder|owner)s?\s+of\s+(?:the\s+)?$",
    re.IGNORECASE,
)
_SHARES_AFTER = re.compile(r"^['\u2019]s\s+(?:stock|shares|subsidiary|subsidiaries)\b")
_SHARES_BEFORE = re.compile(r"\b(?:shares|stock)\s+of\s+(?:the\s+)?$", re.IGNORECASE)
_SUBSIDIARY_AFTER = re.compile(
    r"^,\s+(?:a|an|our)\s+(?:[\w%-]+\s+){0,3}(?:subsidiary|company|affiliate)\b"
)
_WORD = re.compile(r"[A-Za-z][\w&'\u2019./-]*")


@cache
def _listed(name: str) -> frozenset[str]:
    path = resource_path("schemas", name)
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def given_names() -> frozenset[str]:
    """The common given names of ``schemas/given_names.txt`` (lower case)."""
    return _listed("given_names.txt")


def place_names() -> frozenset[str]:
    """The place names of ``schemas/place_names.txt`` (as written)."""
    return _listed("place_names.txt")


def _key(word: str) -> str:
    return word.strip(".,;:()\"'\u2018\u2019\u201c\u201d").lower()


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"\s+", name.strip()) if w]


class _Text:
    """``text`` with the facts the rules ask of it, computed once."""

    def __init__(self, text: str) -> None:
        self.flat = re.sub(r"\s+", " ", text)
        self.lower_words = frozenset(
            re.findall(r"(?<![\w&'\u2019.-])[a-z][a-z'\u2019-]*", self.flat)
        )
        self._places: dict[str, list[tuple[str, str]]] = {}

    def written_lower(self, word: str) -> bool:
        return bool(self.flat) and _key(word) in self.lower_words

    def places(self, name: str) -> list[tuple[str, str]]:
        """(text before, text after) every whole-word occurrence of ``name``."""
        if not self.flat:
            return []
        if name not in self._places:
            pattern = re.compile(r"(?<![\w&])" + re.escape(name) + r"(?![\w&])")
            self._places[name] = [
                (self.flat[max(0, m.start() - 60) : m.start()], self.flat[m.end() : m.end() + 60])
                for m in pattern.finditer(self.flat)
            ]
        return self._places[name]


# the facts of the last texts asked about: the names of one chunk or letter are typed against
# the same text one after another, and each _Text scans the whole text
@lru_cache(maxsize=8)
def _text_of(text: str) -> _Text:
    return _Text(text)


def name_kind(name: str, text: str = "") -> NameKind:
    """``person``, ``organisation``, ``place`` or ``unknown``: the rule in the module docstring.

    ``text`` is the chunk or letter the name was found in; without it only the name's own
    words count.
    """
    return _kind(re.sub(r"\s+", " ", name).strip().rstrip(".,;:"), _text_of(text))


def person_like(name: str, text: str = "") -> bool:
    """Whether :func:`name_kind` types ``name`` as a person."""
    return name_kind(name, text) == "person"


def organisation_like(name: str, text: str = "") -> bool:
    """Whether :func:`name_kind` types ``name`` as an organisation."""
    return name_kind(name, text) == "organisation"


def _kind(name: str, text: _Text) -> NameKind:
    words = _words(name)
    if not words or not words[0][:1].isupper() and not words[0][:1].isdigit():
        return "unknown"
    if _key(words[0]) in _LEADING:
        return "unknown"
    alias = _alias_of(name, text)
    if alias is not None:
        return _kind(alias, _Text(""))
    if _CONNECTOR.search(name) and not _ends_in_legal_form(words):
        parts = {_kind(part, text) for part in _CONNECTOR.split(name) if part}
        if " & " in name and " and " not in name and parts != {"person"}:  # "Ogilvy & Mather"
            return "organisation"
        return parts.pop() if len(parts) == 1 else "unknown"
    for split in (_POSSESSIVE, _OF):
        m = split.match(name)
        if m:
            head = m.group(2) if split is _POSSESSIVE else m.group(1)
            kind = _kind(head, text)
            if kind != "unknown":
                return kind
            # an unknown head is an organisation's own word ("Bank" of "Bank of America",
            # "Diamond Shops" of "Helzberg's Diamond Shops") or no name at all
            has_org = any(_key(w) in ORG_WORDS for w in _words(head))
            return (
                "organisation"
                if has_org and _own_kind(words, text) == "organisation"
                else ("unknown")
            )
    return _own_kind(words, text)


def _alias_of(name: str, text: _Text) -> str | None:
    """The name ``text`` gives ``name`` as a bracketed alias of ("Federal Home Loan Mortgage
    Corp. ("Freddie Mac")" -> the corporation), if any."""
    for before, after in text.places(name):
        if re.match(r"^[\"'\u201d\u2019]?\)", after):
            m = re.search(
                r"((?:[A-Z][\w&.'\u2019-]*,? )*[A-Z][\w&.'\u2019-]*),? \([\"'\u201c\u2018]?$",
                before,
            )
            if m and m.group(1).rstrip(".,") != name:
                return m.group(1).rstrip(",")
    return None


def _fragment(name: str, text: _Text) -> bool:
    """Every occurrence in ``text`` continues a longer name (rule 2)."""
    seen = text.places(name)
    return bool(seen) and all(_continues(before) for before, _after in seen)


def _continues(before: str) -> bool:
    """Whether a name right after ``before`` is the tail of a longer name: a capitalised word
    stands right before it, or "<capitalised word> and" where that word ends no organisation
    name ("National Fire and | Marine Insurance Company", not "... Associates and | Hathaway
    Manufacturing")."""
    m = re.search(r"(^|\S\s*)([A-Za-z][\w'\u2019.-]*)\s+((?:and|&)\s+)?$", before)
    if m is None or not m.group(2)[:1].isupper() or m.group(2).endswith("."):
        return False
    if not m.group(1).strip() or m.group(1).strip()[-1] in ".!?:":  # a sentence's first word
        return False
    key = _key(m.group(2))
    if key in _LEADING or key in TITLES:
        return False
    return not (m.group(3) and key in ORG_WORDS)


def _ends_in_legal_form(words: list[str]) -> bool:
    return len(words) >= 2 and _key(words[-1]) in LEGAL_FORMS


def _own_kind(words: list[str], text: _Text) -> NameKind:  # rules 3 to 10
    keys = [_key(w) for w in words]
    if keys[0] in TITLES and len(words) > 1 and keys[1] not in ROLE_WORDS and keys[1] != "of":
        return "person"
    if any(k in ROLE_WORDS for k in keys) or len(words) > MAX_NAME_WORDS:
        return "unknown"
    if all(k in ORG_WORDS for k in keys):  # "Insurance", "Board": a word, not a name
        return "unknown"
    if _ends_in_legal_form(words) or (
        keys[-1] in ORG_WORDS and any(_distinctive(w, text) for w in words)
    ):
        return "unknown" if _fragment(" ".join(words), text) else "organisation"
    if len(words) == 1:
        kind = _acronym_kind(words[0], text)
        if kind is not None:
            return kind
    name = " ".join(words)
    if name in place_names() or (
        len(words) >= 2 and keys[-1] in PLACE_WORDS and _distinctive(words[0], text)
    ):
        return "place"
    capitalised = all(w[:1].isupper() for w in words if _key(w) not in ("of", "de", "van", "von"))
    if capitalised and keys[0] in given_names() and not any(k in ORG_WORDS for k in keys):
        if len(words) >= 2 and len(words) <= 4:
            return "person"
        if len(words) == 1 and _followed_by_surname(words[0], text):
            return "person"
    return _context_kind(name, words, text)


def _distinctive(word: str, text: _Text) -> bool:
    key = _key(word)
    if key in ORG_WORDS or key in _LEADING or key in ("of", "and", "&") or not key:
        return False
    return not text.written_lower(word)


def _acronym_kind(word: str, text: _Text) -> NameKind | None:
    core = word.strip(".")
    letters = re.sub(r"[^A-Za-z]", "", core)
    if len(letters) < 2 or not letters.isupper():
        return None
    if core.lower() in COMMON_ACRONYMS or letters.lower() in COMMON_ACRONYMS:
        return "unknown"
    if re.search(r"\d", core):  # "S&P-500": an index or a product
        return "unknown"
    seen = text.places(core)
    if seen and all(re.match(r"^[ -]\d", after) for _before, after in seen):
        return "unknown"  # "S&P 500" wherever written: the index, not the company
    for before, after in seen:
        if re.match(r"^[\"'\u201d\u2019]?\)", after):  # "(MBWA)": spelt out before it
            spelt = re.findall(r"[A-Za-z][\w'-]*", before.rsplit("(", 1)[0])[-len(letters) :]
            if spelt and all(w[:1].islower() for w in spelt):
                return "unknown"
        inside = re.match(r"^\s*\(([^()]{3,80})\)", after)  # "ABWA (acquisitions by ...)"
        if inside and all(w[:1].islower() for w in inside.group(1).split()):
            return "unknown"
    if core in place_names():
        return "place"
    return "organisation"


def _followed_by_surname(word: str, text: _Text) -> bool:
    return any(
        re.match(r"^ (?:[A-Z]\. )?[A-Z][a-z]", after) and not re.match(r"^ (?:and|of)\b", after)
        for _before, after in text.places(word)
    )


def _context_kind(name: str, words: list[str], text: _Text) -> NameKind:  # rule 9
    found: set[NameKind] = set()
    titles = "|".join(t.capitalize() for t in TITLES)
    # the text also writes the name alone (not run into more capitalised words), so a
    # corporate word after it elsewhere ("Cypress Insurance Company") is its own
    alone = any(not re.match(r"^ [A-Z]", after) for _before, after in text.places(name))
    # a name of prose words ("Time", "Board") is typed by a legal form after it only
    generic = all(text.written_lower(w) for w in words)
    for before, after in text.places(name):
        if _continues(before):  # inside a longer name here: no evidence for this one
            continue
        if generic:
            legal = re.match(r"^,?\s+([A-Z][\w.&-]*)", after)
            if legal and _key(legal.group(1)) in LEGAL_FORMS:
                found.add("organisation")
            continue
        if re.search(rf"\b(?:{titles})\.?\s+(?:[A-Z][\w.'\u2019-]*\s+)*$", before):
            found.add("person")
        if _PERSON_BEFORE.search(before):
            found.add("person")
        if _ROLE_OF.search(before) or _SHARES_BEFORE.search(before) or _SHARES_AFTER.match(after):
            found.add("organisation")
        if _SUBSIDIARY_AFTER.match(after):
            found.add("organisation")
        following = re.match(r"^,?\s+([A-Z][\w.&-]*)", after)
        if following and _key(following.group(1)) in ORG_WORDS and alone:
            found.add("organisation")
        place = re.match(r"^,\s+([A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)(?![\w'\u2019])", after)
        if place and place.group(1) in place_names():
            found.add("place")
    last = words[-1]
    if len(words) > 1 and len(last) > 2 and not generic and not found:
        for before, _after in text.places(last):
            if re.search(rf"\b(?:{titles})\.?\s+(?:[A-Z][\w.'\u2019-]*\s+)*$", before):
                found.add("person")
    return found.pop() if len(found) == 1 else "unknown"
