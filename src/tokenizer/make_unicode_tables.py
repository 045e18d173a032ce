"""Writes src/tokenizer/unicode_tables.inc: the Unicode character data of the Hugging Face
`tokenizers` library, read out of the library itself (the version pinned in requirements.txt).

The library's components come with Unicode data of different versions: Oniguruma's (regex
\\p{..} classes), Rust's standard library (char::is_numeric for Digits, to_lowercase for
Lowercase), the regex crate (\\w of the Whitespace pre-tokenizer and of single_word added tokens),
the unicode_categories crate (Punctuation) and the unicode-normalization crate (NFC, NFD, NFKC,
NFKD). PCRE2 on this system has another version, and recent characters (new emoji, CJK
extensions) would otherwise tokenize differently. So each set is measured here by running the
library's own component over every code point: decompositions are NFD/NFKD of each character,
the canonical combining classes are ranked by how NFD reorders pairs of marks, and the
compositions are the characters that NFC rebuilds from their decomposition.

Usage: .venv/bin/python src/tokenizer/make_unicode_tables.py
"""
import functools
import pathlib

import tokenizers
from tokenizers import Regex, normalizers, pre_tokenizers

OUT = pathlib.Path(__file__).resolve().parent / "unicode_tables.inc"
CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
              "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co"]
CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]


def ranges(members):
    out = []
    for c in sorted(members):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def removed_complement(pre_tokenizer):
    """Code points that `pre_tokenizer` (a Split with behavior "removed") takes out."""
    text = "".join(map(chr, CODE_POINTS))
    kept = set()
    for _, (start, end) in pre_tokenizer.pre_tokenize_str(text):
        kept.update(range(start, end))
    return {CODE_POINTS[i] for i in range(len(CODE_POINTS)) if i not in kept}


def isolated_after_letter(pre_tokenizer):
    """Code points c that `pre_tokenizer` isolates in "a" + c (a piece of exactly c)."""
    text = "".join("a" + chr(c) for c in CODE_POINTS)
    found = set()
    for _, (start, end) in pre_tokenizer.pre_tokenize_str(text):
        if end - start == 1 and start % 2 == 1:
            found.add(CODE_POINTS[start // 2])
    return found


def word_chars():
    """The regex crate's \\w as the Whitespace pre-tokenizer uses it: c joins "a" in "a" + c + " "."""
    text = "".join("a" + chr(c) + " " for c in CODE_POINTS)
    found = set()
    for _, (start, end) in pre_tokenizers.Whitespace().pre_tokenize_str(text):
        if start % 3 == 0 and end - start == 2:
            found.add(CODE_POINTS[start // 3])
    return found


def lowercase():
    """Code points whose Lowercase normalization is not themselves (Rust's char::to_lowercase)."""
    points = CODE_POINTS[1:]  # U+0000 separates them (and is its own lowercase)
    text = "\x00".join(map(chr, points))
    lowered = normalizers.Lowercase().normalize_str(text).split("\x00")
    assert len(lowered) == len(points)
    return {c: low for c, low in zip(points, lowered) if low != chr(c)}


def nfd_each(normalizer, points):
    """normalizer applied to each code point on its own (U+0000 separates them)."""
    points = [c for c in points if c != 0]
    out = normalizer.normalize_str("\x00".join(map(chr, points))).split("\x00")
    assert len(out) == len(points)
    return dict(zip(points, out))


def combining_ranks(nfd):
    """Canonical combining classes as ranks 1..n (0 for starters): only their order matters."""
    nfd_normalizer = normalizers.NFD()
    plain = [c for c in CODE_POINTS if c != 0 and nfd[c] == chr(c) and not 0xAC00 <= c <= 0xD7A3]
    # U+0334 has the lowest non-zero class (1) and U+0345 the highest (240): a mark with a
    # non-zero class moves in front of U+0334 or behind U+0345.
    low = nfd_normalizer.normalize_str("".join("\x00" + chr(c) + "\u0334" for c in plain))
    high = nfd_normalizer.normalize_str("".join("\x00\u0345" + chr(c) for c in plain))
    marks = [c for i, c in enumerate(plain)
             if low[3 * i + 1] != chr(c) or high[3 * i + 2] != chr(c) or c in (0x334, 0x345)]

    def compare(a, b):
        if nfd_normalizer.normalize_str(chr(a) + chr(b)) != chr(a) + chr(b):
            return 1  # a has the higher class
        if nfd_normalizer.normalize_str(chr(b) + chr(a)) != chr(b) + chr(a):
            return -1
        return 0

    marks.sort(key=functools.cmp_to_key(compare))
    ranks, rank = {}, 0
    for i, c in enumerate(marks):
        if i == 0 or compare(marks[i - 1], c) != 0:
            rank += 1
        ranks[c] = rank
    return ranks


def compositions(nfd):
    """(first, second) -> composite for the characters that NFC rebuilds from their NFD."""
    nfc = normalizers.NFC()
    pairs = {}
    for c, d in nfd.items():
        if d == chr(c) or len(d) < 2 or 0xAC00 <= c <= 0xD7A3 or nfc.normalize_str(d) != chr(c):
            continue
        # The second character of the pair is one of the decomposition's, usually the last.
        for j in reversed(range(len(d))):
            first = nfc.normalize_str(d[:j] + d[j + 1:])
            if len(first) == 1 and nfc.normalize_str(first + d[j]) == chr(c):
                pairs[(ord(first), ord(d[j]))] = c
                break
        else:
            raise AssertionError(f"no composition pair for U+{c:04X}")
    return pairs


def c_string(s):
    return '"' + "".join(f"\\x{b:02X}" for b in s.encode("utf-8")) + '"'


def write_ranges(f, name, members):
    f.write(f"constexpr CodePointRange {name}[] = {{\n")
    row = []
    for lo, hi in ranges(members):
        row.append(f"{{0x{lo:X}, 0x{hi:X}}}")
        if len(row) == 6:
            f.write("    " + ", ".join(row) + ",\n")
            row = []
    if row:
        f.write("    " + ", ".join(row) + ",\n")
    f.write("};\n")


def main():
    categories = {}
    for name in CATEGORIES:
        split = pre_tokenizers.Split(Regex(r"\p{" + name + "}"), "removed")
        categories[name] = removed_complement(split)
    assigned = set().union(*categories.values())
    for a in CATEGORIES:
        for b in CATEGORIES:
            assert a == b or not categories[a] & categories[b], (a, b)
    categories["Cn"] = set(CODE_POINTS) - assigned
    numeric = isolated_after_letter(pre_tokenizers.Digits(individual_digits=True))
    punctuation = isolated_after_letter(pre_tokenizers.Punctuation("isolated"))
    words = word_chars()
    lower = lowercase()
    nfd = nfd_each(normalizers.NFD(), CODE_POINTS)
    nfkd = nfd_each(normalizers.NFKD(), CODE_POINTS)
    ranks = combining_ranks(nfd)
    pairs = compositions(nfd)

    with open(OUT, "w", encoding="ascii") as f:
        f.write(f"// Generated by make_unicode_tables.py from tokenizers {tokenizers.__version__}; "
                "do not edit.\n// Included by unicode_tables.cpp only.\n\n")
        for name in CATEGORIES + ["Cn"]:
            write_ranges(f, f"k{name}", categories[name])
        f.write("\nconstexpr CategoryTable kCategoryTables[] = {\n")
        for name in CATEGORIES + ["Cn"]:
            f.write(f'    {{"{name}", k{name}}},\n')
        f.write("};\n\n// Rust char::is_numeric (Digits).\n")
        write_ranges(f, "kNumeric", numeric)
        f.write("\n// ASCII or unicode_categories' punctuation (Punctuation).\n")
        write_ranges(f, "kPunctuation", punctuation)
        f.write("\n// The regex crate's Unicode \\w (Whitespace, single_word added tokens).\n")
        write_ranges(f, "kRustWordChars", words)
        f.write("\n// Rust char::to_lowercase where it is not the identity, by code point.\n")
        f.write("constexpr LowercaseEntry kLowercase[] = {\n")
        for c, low in sorted(lower.items()):
            f.write(f"    {{0x{c:X}, {c_string(low)}}},\n")
        f.write("};\n")
        f.write("\n// Full canonical decompositions (NFD of one character), Hangul syllables excepted.\n")
        f.write("constexpr MappingEntry kCanonicalDecompositions[] = {\n")
        for c in sorted(nfd):
            if nfd[c] != chr(c) and not 0xAC00 <= c <= 0xD7A3:
                f.write(f"    {{0x{c:X}, {c_string(nfd[c])}}},\n")
        f.write("};\n\n// Full compatibility decompositions (NFKD) where they differ from NFD.\n")
        f.write("constexpr MappingEntry kCompatibilityDecompositions[] = {\n")
        for c in sorted(nfkd):
            if nfkd[c] != nfd[c] and not 0xAC00 <= c <= 0xD7A3:
                f.write(f"    {{0x{c:X}, {c_string(nfkd[c])}}},\n")
        f.write("};\n\n// Canonical combining classes as ranks (same order; starters omitted).\n")
        f.write("constexpr CombiningEntry kCombiningRanks[] = {\n")
        for c in sorted(ranks):
            f.write(f"    {{0x{c:X}, {ranks[c]}}},\n")
        f.write("};\n\n// Canonical compositions: first, second, composite (Hangul excepted).\n")
        f.write("constexpr CompositionEntry kCompositions[] = {\n")
        for (a, b), c in sorted(pairs.items()):
            f.write(f"    {{0x{a:X}, 0x{b:X}, 0x{c:X}}},\n")
        f.write("};\n")


if __name__ == "__main__":
    main()
