#!/usr/bin/env python3
"""gen_sql.py - writes the SQL script of the benchmarks' sqlite3 workload
(bench/run.py runs `sqlite3 :memory: ".read OUT.sql"`): a real program's
allocations (parser, B-trees, page cache) that nobody here wrote.

usage: gen_sql.py OUT.sql [ROWS] [SEED]

ROWS rows (default 150000) go in as one literal INSERT each, so the shell
parses and prepares a statement per row, BATCH to a transaction, into a
table with two secondary indexes; then grouping, sorting and joining
queries, an UPDATE and a DELETE, each printing a few lines. The script
depends only on ROWS and SEED. It must never write anything but OUT.sql.
"""
import random
import sys

USAGE_EXIT = 2           # README "Exit codes": usage error
BATCH = 10000            # rows per transaction
CITIES = 1000            # rows of the joined table
TAGS = ("amber", "basalt", "cedar", "dune", "ember", "fjord", "granite", "heath",
        "iris", "juniper", "kelp", "lichen", "marsh", "nettle", "opal", "pine")


def write(out, rows, seed):
    rnd = random.Random(seed)
    out.write("PRAGMA cache_size=-65536;\n")
    out.write("CREATE TABLE city(id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n")
    out.write("CREATE TABLE reading(id INTEGER PRIMARY KEY, city INTEGER NOT NULL, "
              "tag TEXT NOT NULL, value REAL NOT NULL, note TEXT);\n")
    out.write("CREATE INDEX reading_city ON reading(city);\n")
    out.write("CREATE INDEX reading_tag ON reading(tag, value);\n")
    out.write("BEGIN;\n")
    for c in range(CITIES):
        out.write("INSERT INTO city VALUES(%d, '%s %d');\n" % (c, rnd.choice(TAGS), c))
    out.write("COMMIT;\n")
    for i in range(rows):
        if i % BATCH == 0:
            out.write("BEGIN;\n")
        tag = "%s-%s-%d" % (rnd.choice(TAGS), rnd.choice(TAGS), rnd.randrange(1000000))
        note = rnd.choice(TAGS) * rnd.randrange(1, 12)
        out.write("INSERT INTO reading(city, tag, value, note) VALUES(%d, '%s', %.4f, '%s');\n"
                  % (rnd.randrange(CITIES), tag, rnd.random() * 1000, note))
        if i % BATCH == BATCH - 1 or i == rows - 1:
            out.write("COMMIT;\n")
    out.write("SELECT city, count(*), round(avg(value), 3), max(length(note)) FROM reading "
              "GROUP BY city ORDER BY 2 DESC, 1 LIMIT 5;\n")
    out.write("SELECT substr(tag, 1, instr(tag, '-') - 1) AS t, count(*), round(sum(value), 1) "
              "FROM reading GROUP BY t ORDER BY t LIMIT 5;\n")
    out.write("SELECT c.name, count(*) FROM reading r JOIN city c ON c.id = r.city "
              "WHERE r.value > 500 GROUP BY c.name ORDER BY 2 DESC, 1 LIMIT 5;\n")
    out.write("SELECT count(DISTINCT note) FROM reading;\n")
    out.write("UPDATE reading SET value = value / 2 WHERE city % 7 = 0;\n")
    out.write("DELETE FROM reading WHERE city % 11 = 0;\n")
    out.write("SELECT count(*), round(sum(value), 1) FROM reading;\n")


def main():
    if not 2 <= len(sys.argv) <= 4:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(USAGE_EXIT)
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 150000
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 42
    with open(sys.argv[1], "w") as out:
        write(out, rows, seed)


if __name__ == "__main__":
    main()
