#!/usr/bin/env python3
"""Holds the program to its one manual, man/tsarchive.1.md.

  check_manual.py commands TSARCHIVE MANUAL
      Every command, subcommand and option that `tsarchive --help-all` (and
      `tsarchive help COMMAND SUB` for nested subcommands) names is in the
      manual: a command has a section "## tsarchive COMMAND ..." under
      COMMANDS and a line in SYNOPSIS; an option appears in its command's
      section, or in GLOBAL OPTIONS / WORKER OPTIONS (options every command
      or every libtorch command takes).

  check_manual.py exit-codes TSARCHIVE MANUAL SOURCE_DIR
      The table under "# EXIT STATUS" has one row per exit status and no
      other: each ErrorKind of src/base/error.h with the JSON kind name that
      src/cli/output.cc gives it, and 128 plus each signal src/base/temp_files_and_locks.cc
      holds off while it writes. `tsarchive --help`'s footer and README.md's
      "## Exit codes" summary name the same codes.

  check_manual.py man-page MAN_PAGE MANUAL
      The man page the build made from the manual has every '#' section of it.

Each failure names what is missing and where to add it; the exit status is 1.
"""
import re
import subprocess
import sys

MANUAL_NAME = "man/tsarchive.1.md"


def fail(problems):
    for p in problems:
        print(f"FAIL: {p}", file=sys.stderr)
    print(f"{len(problems)} problem(s); the manual is {MANUAL_NAME}", file=sys.stderr)
    sys.exit(1)


def plain(markdown):
    """Markdown text without emphasis and escapes, so '**\\--json**' reads '--json'."""
    return re.sub(r"[*\\]", "", markdown)


def without_front_matter(markdown):
    """The manual without its YAML block (title, section; its comments start with '#')."""
    m = re.match(r"^---\n.*?\n---\n", markdown, re.S)
    return markdown[m.end():] if m else markdown


def sections(markdown):
    """{heading: body} for '# ' and '## ' headings, headings without markup."""
    markdown = without_front_matter(markdown)
    out, name, body = {}, "", []
    for line in markdown.splitlines():
        m = re.match(r"^(#{1,2}) (.*)$", line)
        if m:
            out[name] = "\n".join(body)
            name, body = plain(m.group(2)).strip().strip('"'), []
        else:
            body.append(line)
    out[name] = "\n".join(body)
    return out


def mentions(text, option):
    return re.search(r"(?<![\w-])" + re.escape(option) + r"(?![\w-])", plain(text)) is not None


def help_text(tsarchive, *args):
    r = subprocess.run([tsarchive, *args], capture_output=True, text=True)
    if r.returncode != 0:
        fail([f"'tsarchive {' '.join(args)}' exited {r.returncode}: {r.stderr.strip()}"])
    return r.stdout


def parse_options(lines):
    """Option names ('-o', '--output') on CLI11's option lines."""
    names = []
    for line in lines:
        m = re.match(r"^\s+(-[^\s]+)", line)
        if m:
            names += [n for n in m.group(1).split(",") if n.startswith("-")]
    return names


def parse_help_all(text):
    """{command: (options, [nested subcommand names])} from --help-all."""
    lines = text.splitlines()
    top_end = next(i for i, l in enumerate(lines) if l.startswith("Subcommands:"))
    commands = {"": (parse_options(lines[:top_end]), [])}
    current, block, body = None, None, []

    def close():
        if current is None:
            return
        opts, subs, mode = [], [], None
        for l in body:
            s = l.strip()
            if s in ("Options:", "Positionals:", "Subcommands:"):
                mode = s
            elif mode == "Options:":
                opts += parse_options([l])
            elif mode == "Subcommands:":
                m = re.match(r"^\s{4}([a-z][\w-]*)\b", l)
                if m:
                    subs.append(m.group(1))
        commands[current] = (opts, subs)

    for line in lines[top_end + 1:]:
        if re.match(r"^[a-z][\w-]*$", line):
            close()
            current, body = line, []
        elif line and not line.startswith(" "):  # the footer
            close()
            current, body = None, []
        else:
            body.append(line)
    close()
    return commands


def parse_command_help(text):
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("Options:")), len(lines))
    opts = []
    for l in lines[start + 1:]:
        if l and not l.startswith(" "):
            break
        opts += parse_options([l])
    return opts


def check_commands(tsarchive, manual_path):
    manual = open(manual_path, encoding="utf-8").read()
    secs = sections(manual)
    shared = secs.get("GLOBAL OPTIONS", "") + secs.get("WORKER OPTIONS", "")
    synopsis = plain(secs.get("SYNOPSIS", ""))
    command_sections = {}
    for heading, body in secs.items():
        m = re.match(r"^tsarchive ([a-z][\w-]*)", heading)
        if m:
            command_sections[m.group(1)] = heading + "\n" + body
    problems = []
    help_all = parse_help_all(help_text(tsarchive, "--help-all"))
    seen = 0
    for command, (options, subs) in help_all.items():
        if command == "":
            where, label = secs.get("GLOBAL OPTIONS", ""), "tsarchive"
        else:
            label = f"tsarchive {command}"
            if not re.search(r"(?<![\w-])tsarchive " + re.escape(command) + r"(?![\w-])", synopsis):
                problems.append(f"command '{command}' is not in '# SYNOPSIS' (add a line 'tsarchive {command} ...')")
            if command not in command_sections:
                problems.append(f"command '{command}' (in --help-all) has no section "
                                f"'## tsarchive {command} ...' under '# COMMANDS' (its options are checked "
                                "once it has one)")
                continue
            where = command_sections[command]
        for sub in subs:
            if not re.search(r"tsarchive " + re.escape(command) + " " + re.escape(sub) + r"(?![\w-])", synopsis):
                problems.append(f"subcommand '{command} {sub}' is not in '# SYNOPSIS'")
            if not mentions(where, f"{command} {sub}") and not re.search(
                    r"^\s*\**" + re.escape(sub) + r"\b", where, re.M):
                problems.append(f"subcommand '{command} {sub}' is not described in the section "
                                f"'## tsarchive {command} ...'")
            for opt in parse_command_help(help_text(tsarchive, "help", command, sub)):
                seen += 1
                if opt in ("-h", "--help", "--help-all"):
                    continue
                if not mentions(where, opt) and not mentions(shared, opt):
                    problems.append(f"option '{opt}' of 'tsarchive {command} {sub}' is not in the section "
                                    f"'## tsarchive {command} ...' (nor in GLOBAL/WORKER OPTIONS)")
        for opt in options:
            seen += 1
            if opt in ("-h", "--help") and command:
                continue
            if not mentions(where, opt) and not mentions(shared, opt):
                section = "'# GLOBAL OPTIONS'" if command == "" else f"the section '## tsarchive {command} ...'"
                problems.append(f"option '{opt}' of '{label}' is not in {section} (nor in GLOBAL/WORKER OPTIONS)")
    if len(help_all) < 5 or seen < 20:
        problems.append(f"read only {len(help_all)} commands and {seen} options from --help-all: "
                        "has its layout changed? (tests/docs/check_manual.py, parse_help_all)")
    if problems:
        fail(problems)
    print(f"manual: {len(help_all) - 1} commands and {seen} options of --help-all are all documented")


def exit_table(manual):
    body = sections(manual).get("EXIT STATUS")
    if body is None:
        fail(["the manual has no '# EXIT STATUS' section"])
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) >= 3 and cells[0].isdigit():
            rows[int(cells[0])] = (cells[1], cells[2])
    return rows


def check_exit_codes(tsarchive, manual_path, source_dir):
    rows = exit_table(open(manual_path, encoding="utf-8").read())
    error_h = open(f"{source_dir}/src/base/error.h", encoding="utf-8").read()
    enum = re.search(r"enum class ErrorKind\s*\{(.*?)\};", error_h, re.S)
    kinds = {name: int(value) for name, value in re.findall(r"^\s*(\w+)\s*=\s*(\d+)", enum.group(1), re.M)}
    output_cc = open(f"{source_dir}/src/cli/output.cc", encoding="utf-8").read()
    json_names = dict(re.findall(r"case ErrorKind::(\w+):\s*return \"(\w+)\"", output_cc))
    cleanup = "".join(open(f"{source_dir}/src/base/temp_files_and_locks.{ext}", encoding="utf-8").read()
                      for ext in ("h", "cc"))
    signal_numbers = {"SIGHUP": 1, "SIGINT": 2, "SIGTERM": 15}
    held = sorted({s for s in re.findall(r"\b(SIG[A-Z]+)\b", cleanup) if s in signal_numbers})
    problems = []
    if not kinds:
        problems.append("found no ErrorKind values in src/base/error.h")
    if "_exit(128 + sig)" not in cleanup or not held:
        problems.append("src/base/temp_files_and_locks.cc no longer exits 128 + the signal: update check_exit_codes")
    expected = {0: ("", "success")}
    for name, code in kinds.items():
        if name not in json_names:
            problems.append(f"ErrorKind::{name} has no JSON kind name in src/cli/output.cc (kind_name)")
        expected[code] = (json_names.get(name, "?"), f"ErrorKind::{name}")
    for sig in held:
        expected[128 + signal_numbers[sig]] = ("", f"interrupted by {sig}")
    for code, (kind, why) in sorted(expected.items()):
        if code not in rows:
            problems.append(f"exit code {code} ({why}) has no row in the table under '# EXIT STATUS': add "
                            f"'| {code} | {kind} | ... |'")
        elif rows[code][0] != kind:
            problems.append(f"exit code {code} ({why}): the table's kind is '{rows[code][0]}', the code's '{kind}'")
    for code in sorted(set(rows) - set(expected)):
        problems.append(f"the table under '# EXIT STATUS' has a row for exit code {code}, "
                        "which no ErrorKind or signal gives")
    footer = help_text(tsarchive, "--help")
    m = re.search(r"^Exit codes:(.*?)See man tsarchive", footer, re.S | re.M)
    if not m:
        problems.append("tsarchive --help has no footer 'Exit codes: ... See man tsarchive' (src/cli/cli.cc)")
    else:
        named = {int(c) for c in re.findall(r"\b(\d+)\b", m.group(1))}
        for code in sorted(set(expected) - named):
            problems.append(f"tsarchive --help's footer (src/cli/cli.cc, exit_codes) does not name exit code {code}")
        for code in sorted(named - set(expected)):
            problems.append(f"tsarchive --help's footer names exit code {code}, which no ErrorKind or signal gives")
    readme = open(f"{source_dir}/README.md", encoding="utf-8").read()
    m = re.search(r"^## Exit codes\n(.*?)The one table", readme, re.S | re.M)
    if not m:
        problems.append("README.md has no '## Exit codes' summary ending 'The one table ... is in the manual'")
    else:
        named = {int(c) for c in re.findall(r"\b(\d+)\b", m.group(1))}
        for code in sorted(set(expected) ^ named):
            problems.append(f"README.md's '## Exit codes' summary and the code disagree on exit code {code}")
    if problems:
        fail(problems)
    print(f"manual: exit codes {', '.join(map(str, sorted(expected)))} are in the one table, --help and README.md")


def check_man_page(man_page, manual_path):
    roff = open(man_page, encoding="utf-8").read()
    headings = re.findall(r"^# (.*)$", without_front_matter(open(manual_path, encoding="utf-8").read()), re.M)
    found = {re.sub(r'[\\"]', "", h).strip() for h in re.findall(r"^\.SH (.*)$", roff, re.M)}
    problems = [f"{man_page} lacks the section '{h}' (rebuild: cmake --build BUILD --target tsarchive_man)"
                for h in headings if plain(h).strip() not in found]
    if ".TH " not in roff:
        problems.append(f"{man_page} is not a man page")
    if problems:
        fail(problems)
    print(f"man page: {len(headings)} sections, all there")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "commands":
        check_commands(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "man-page":
        check_man_page(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "exit-codes":
        check_exit_codes(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
