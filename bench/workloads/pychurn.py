"""pychurn.py - a Python workload for bench/run.py: dict, list and str
churn under deep recursion, run by the system python3 with
PYTHONMALLOC=malloc so that every object Python makes is a malloc call.

The recursion goes through a builtin (map), so each level is also a few C
frames of the interpreter: the allocations' stacks are deep and change at
their inner end between consecutive allocations, as in a real program.

usage: pychurn.py ROUNDS DEPTH
Each round walks a tree DEPTH levels deep (FANOUT children at the top
levels, one below), building at each node a dict of str keys to lists,
a joined str and a filtered list, and keeps a window of WINDOW rounds'
results alive. Prints the number of nodes visited."""
import sys

FANOUT = 3            # children of a node in the top BRANCH_LEVELS
BRANCH_LEVELS = 4
WINDOW = 8            # rounds whose results stay alive at once
KEYS = 12             # keys of each node's dict


def node(depth, seed):
    d = {"k%d_%d" % (seed, i): [seed + i, str(i) * 3, (i, seed)] for i in range(KEYS)}
    text = "-".join(k for k in d if k.endswith(str(seed % 10)))
    kept = [v for v in d.values() if v[0] % 2]
    if depth == 0:
        return [len(text), len(kept)]
    width = FANOUT if depth > DEPTH - BRANCH_LEVELS else 1
    below = list(map(node, [depth - 1] * width, range(seed, seed + width)))
    return [len(text) + sum(b[0] for b in below), len(kept), below]


def count(tree):
    return 1 + sum(count(b) for b in tree[2]) if len(tree) > 2 else 1


if __name__ == "__main__":
    ROUNDS, DEPTH = int(sys.argv[1]), int(sys.argv[2])
    sys.setrecursionlimit(10000)
    window, visited = [], 0
    for r in range(ROUNDS):
        t = node(DEPTH, r)
        visited += count(t)
        window.append(t)
        if len(window) > WINDOW:
            window.pop(0)
    print(visited)
