#!/usr/bin/env python3
"""The README's strategy table: print it, or replace it with the registry's.

  readme_table.py README.md                         print the table between the markers
  readme_table.py README.md --update <gpualloc-info>  write `gpualloc-info --markdown` there
"""
import subprocess
import sys

BEGIN = "<!-- strategy-table"
END = "<!-- end strategy-table -->"


def split(text):
    begin = text.index(BEGIN)
    body_start = text.index("\n", begin) + 1
    end = text.index(END, body_start)
    return text[:body_start], text[body_start:end], text[end:]


def main(argv):
    path = argv[1]
    with open(path) as f:
        head, table, tail = split(f.read())
    if len(argv) == 4 and argv[2] == "--update":
        table = subprocess.run([argv[3], "--markdown"], check=True, capture_output=True, text=True).stdout
        with open(path, "w") as f:
            f.write(head + table + tail)
        return 0
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
