"""Offline word data for textarena's word games, built when NLTK's own is absent.

textarena's word games (Wordle-v0 and friends) read two NLTK resources that NLTK
downloads from the network on first use: the `words` corpus (its `en` and
`en-basic` lists) and the `averaged_perceptron_tagger_eng` part-of-speech tagger,
which Wordle uses only to keep the nouns of `en-basic` as its secret words. vfgym
never downloads, so when either resource is missing `ensure_word_data()` builds a
stand-in NLTK data directory from what is already on the machine:

- `corpora/words/en`: the words of the Hunspell dictionary textarena itself ships
  (textarena accepts those as English guesses anyway);
- `corpora/words/en-basic`: `BASIC_NOUNS` below, a list of everyday English nouns
  written for vfgym, standing in for the 850 words of Basic English;
- `taggers/averaged_perceptron_tagger_eng`: a tagger with one class, `NN`, which
  calls every word a noun. That is right for `BASIC_NOUNS`, and it is the only
  use the games make of it; do not use this tagger for anything else.

The directory goes last on `nltk.data.path`, so real NLTK data found anywhere
earlier wins. With the stand-in, Wordle's secret words come from `BASIC_NOUNS`
instead of NLTK's list: other words than a machine with NLTK's data would draw,
from the same seed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The NLTK resources textarena's word games load, and where NLTK looks them up.
NLTK_RESOURCES = {
    "words": "corpora/words",
    "averaged_perceptron_tagger_eng": "taggers/averaged_perceptron_tagger_eng",
}

#: Everyday English nouns, the stand-in for NLTK's `en-basic` list.
BASIC_NOUNS = tuple(
    """
    acid actor adult agent alarm album angle ankle apple apron arena armor arrow
    aunt baby badge bagel baker beach beard beast belly bench berry bible bird
    blade blame blast block blood board boat bone bonus book boot booth bottle
    brain brake brand bread brick bride brush cabin cable cake camel camp candy
    canoe cargo carpet cart chain chair chalk charm chart cheek chess chest chief
    child chin choir cider claim class clerk cliff clock cloth cloud clown coach
    coast cobra cocoa coin colon comet coral couch cough court cover cow crane
    cream crest crowd crown crumb crust curve cycle daisy dance debut demon depot
    desk diary dinner dog doll donor door dough dozen draft drain drama dream
    dress drill drink drum duck eagle earth eel elbow ember enemy entry error
    essay event fable fairy faith farm feast fence ferry fever fiber field fight
    film flame flash fleet flock floor flour fluid flute focus force forest fork
    frame fruit fudge fungi gang garden gate ghost giant girl glass glove goat
    grain grape grass grave gravy guard guest guide habit hand harp hatch haven
    heart hedge hinge hobby honey horse hotel house human igloo image index inlet
    irony ivory jelly jewel joint judge juice kayak kettle knife koala label
    lace ladder lake lamp lance laser lemon level lever light lilac linen liver
    llama lobby lodge lunch maple march match mayor medal melon metal meter
    minor model money month motor mouse mouth movie mural music nerve niece night
    noise north novel nurse ocean offer olive onion opera orbit organ otter
    owner paint panel paper party pasta paste patch peach pearl pedal penny
    piano piece pilot pizza plane plant plate plaza poem point polka porch pouch
    pound power price pride prize proof pulse puppy quilt radio rails ranch
    raven razor rebel relay rider ridge rifle river roast robin robot rodeo
    roof room rope rose route royal ruler salad salon sauce scale scarf scene
    scent score scout screw shade shape shark sheep shelf shell shirt shoe
    shore siren skirt skull slate sleep slice smile smoke snack snake sofa
    solid sound south space spade spice spine spoon sport squad stack staff
    stage stain stair stamp steam steel stick stone storm story stove straw
    sugar suite sweat table tiger toast token tooth torch tower toy track
    trail train tray treat trend trial tribe truck trunk truth tulip tutor
    uncle union valley value vapor vault verse video villa vinyl viola voice
    wagon waist watch water whale wheat wheel widow woman world yacht yard
    yeast youth zebra
    """.split()
)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vfgym" / "nltk_data"


def missing_resources() -> list[str]:
    """The NLTK resources of `NLTK_RESOURCES` that no directory on NLTK's path holds."""
    import nltk

    missing = []
    for name, path in NLTK_RESOURCES.items():
        try:
            nltk.data.find(path)
        except LookupError:
            missing.append(name)
    return missing


def _hunspell_words() -> list[str]:
    """The alphabetic entries of the Hunspell US dictionary textarena ships."""
    import importlib.util

    # found without importing textarena, whose import already looks for NLTK's data
    spec = importlib.util.find_spec("textarena")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("textarena is not installed", name="textarena")
    package = Path(next(iter(spec.submodule_search_locations)))
    dictionary = package / "envs" / "utils" / "data" / "en_US.dic"
    entries = dictionary.read_text(encoding="utf-8", errors="replace").splitlines()[1:]
    stems = (entry.split("/", 1)[0].strip() for entry in entries)
    return sorted({stem for stem in stems if stem.isascii() and stem.isalpha()})


def build_word_data(root: Path) -> Path:
    """Write the stand-in NLTK data directory at `root` (see the module docstring)."""
    words = root / "corpora" / "words"
    words.mkdir(parents=True, exist_ok=True)
    (words / "en").write_text("\n".join(_hunspell_words()) + "\n", encoding="ascii")
    (words / "en-basic").write_text("\n".join(sorted(BASIC_NOUNS)) + "\n", encoding="ascii")
    (words / "README").write_text(
        "Built by vfgym for textarena's word games: en from textarena's Hunspell "
        "dictionary, en-basic from vfgym's list of everyday nouns.\n",
        encoding="ascii",
    )
    tagger = root / "taggers" / "averaged_perceptron_tagger_eng"
    tagger.mkdir(parents=True, exist_ok=True)
    prefix = "averaged_perceptron_tagger_eng"
    parts: dict[str, Any] = {"weights": {}, "tagdict": {}, "classes": ["NN"]}
    for attr, value in parts.items():
        (tagger / f"{prefix}.{attr}.json").write_text(json.dumps(value), encoding="utf-8")
    (root / ".vfgym-built").write_text("1\n", encoding="utf-8")
    return root


def ensure_word_data(root: Path | None = None) -> Path | None:
    """Make NLTK find the word data textarena's games need, building the stand-in
    (once, under ~/.cache/vfgym/nltk_data) when some is missing. Returns the
    stand-in's directory, or None when NLTK's own data is all there."""
    import nltk

    if not missing_resources():
        return None
    root = root or _cache_dir()
    if not (root / ".vfgym-built").exists():
        build_word_data(root)
    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))
    still_missing = missing_resources()
    if still_missing:
        raise RuntimeError(
            f"NLTK still cannot find {', '.join(still_missing)} after vfgym built its "
            f"word data at {root}; remove that directory to have it built again."
        )
    return root


@contextmanager
def offline_downloads() -> Iterator[None]:
    """While textarena builds a game, `nltk.download` only checks the data is there
    (textarena calls it on every game it makes); it never goes to the network."""
    import nltk

    original = nltk.download

    def check_only(info_or_id: Any = None, *args: Any, **kwargs: Any) -> bool:
        path = NLTK_RESOURCES.get(str(info_or_id))
        if path is None:
            return False
        try:
            nltk.data.find(path)
        except LookupError:
            return False
        return True

    nltk.download = check_only
    try:
        yield
    finally:
        nltk.download = original
