"""Finding the Debian mirror in apt sources, in both file formats (host names are made up)."""

from agentrl.sandbox.images import parse_apt_sources, pick_debian_mirror

DEB822 = """\
Types: deb
# a comment: http://old.example/debian
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""

CLASSIC = """\
# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb http://security.example/debian-security bookworm-security main
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] https://classic.example/debian bookworm main contrib
"""

THIRD_PARTY = """\
Types: deb
URIs: https://vendor.example/node_20.x
Suites: nodistro
Components: main
"""


def test_parse_deb822() -> None:
    entries = parse_apt_sources(DEB822, deb822=True)
    assert entries == [
        ("http://mirror.example/debian/", ["bookworm", "bookworm-updates"], ["main"]),
        ("http://mirror.example/debian-security", ["bookworm-security"], ["main"]),
    ]


def test_parse_classic_skips_comments_sources_and_options() -> None:
    entries = parse_apt_sources(CLASSIC, deb822=False)
    assert entries == [
        ("http://security.example/debian-security", ["bookworm-security"], ["main"]),
        ("https://classic.example/debian", ["bookworm"], ["main", "contrib"]),
    ]


def test_pick_from_deb822_skips_security_and_third_party() -> None:
    files = [("/a/nodesource.sources", THIRD_PARTY), ("/a/debian.sources", DEB822)]
    assert pick_debian_mirror(files) == "http://mirror.example/debian"


def test_pick_from_classic_list() -> None:
    assert pick_debian_mirror([("/etc/apt/sources.list", CLASSIC)]) == "https://classic.example/debian"


def test_disabled_stanza_and_no_match() -> None:
    disabled = DEB822.replace("Types: deb\n#", "Types: deb\nEnabled: no\n#", 1)
    assert pick_debian_mirror([("x.sources", disabled)]) is None
    assert pick_debian_mirror([("x.sources", THIRD_PARTY)]) is None
    assert pick_debian_mirror([]) is None


def test_other_release_falls_back_to_plain_debian_archive() -> None:
    trixie = "deb http://mirror.example/debian trixie main\ndeb http://other.example/repo stable main\n"
    assert pick_debian_mirror([("sources.list", trixie)]) == "http://mirror.example/debian"
