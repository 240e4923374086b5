# Debian Packages index (RFC 822 stanzas) -> JSON Lines, one package per
# line, N packages spread evenly over the index.
import json, sys
n = int(sys.argv[1])
stanzas, cur, last = [], {}, None
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line:
        if cur: stanzas.append(cur)
        cur, last = {}, None
    elif line[0] in " \t" and last:
        cur[last] += "\n" + line[1:]
    else:
        k, _, v = line.partition(":")
        last = k.strip().lower().replace("-", "_")
        cur[last] = v.strip()
if cur: stanzas.append(cur)
step = len(stanzas) / n
for i in range(n):
    print(json.dumps(stanzas[int(i * step)], ensure_ascii=False))
