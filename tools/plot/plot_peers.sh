#!/bin/sh
# Draws the figures of docs/benchmarks.md from depengine-peers' JSON file,
# with awk and gnuplot only (Debian: apt-get install -y gnuplot):
#   peers_advantage.svg   how many times better depengine per-device is than each peer, per workload
#   peers_bars.svg        the median figure of each engine, one panel per workload
#   peers_scaling_w1.svg  W1 ns/op as N grows
#   peers_scaling_w2.svg  W2 ns/op as the number of vars K grows
#
# usage: tools/plot/plot_peers.sh [peers.json] [output dir]
#   defaults: docs/benchmarks/peers.json, and the directory of the JSON file.
#   PLOT_FORMAT=png writes PNG files instead of SVG.
set -eu

json=${1:-$(cd "$(dirname "$0")/../.." && pwd)/docs/benchmarks/peers.json}
out=${2:-$(dirname "$json")}
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "plot_peers.sh: gnuplot not found (as root: apt-get update && apt-get install -y gnuplot)" >&2
  exit 1
fi
[ -r "$json" ] || { echo "plot_peers.sh: cannot read $json" >&2; exit 1; }
mkdir -p "$out"
ext=${PLOT_FORMAT:-svg}
case "$ext" in
  svg) term='svg dynamic background "white"' ;;
  png) term='pngcairo background "white"' ;;
  *) echo "plot_peers.sh: PLOT_FORMAT must be svg or png" >&2; exit 1 ;;
esac
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT

# depengine-peers writes one engine and one result per line; pull the fields
# out with awk into gnuplot data files.
awk -v dir="$data" '
function field(line, key,    m) {
  if (match(line, "\"" key "\": (\"[^\"]*\"|[^,}]*)")) {
    m = substr(line, RSTART, RLENGTH)
    sub("^\"" key "\": ", "", m)
    gsub(/^"|"$/, "", m)
    return m
  }
  return ""
}
function num(v) { return (v == "" || v == "null") ? "?" : v }
BEGIN {
  # One colour per engine in every figure.
  rgb["depengine-perdevice"] = "#111111"; rgb["depengine-pooled"] = "#7b3294"; rgb["depengine-naive"] = "#c2a5cf"
  rgb["omp-gcc"] = "#1b9e77"; rgb["omp-clang"] = "#66a61e"; rgb["starpu"] = "#d95f02"; rgb["tbb"] = "#e6ab02"
  rgb["lapacke-dpotrf"] = "#377eb8"; rgb["dgemm-peak"] = "#80b1d3"
}
function colour(e) { return (e in rgb) ? rgb[e] : "#999999" }
function hexval(c,    i, v, d) {
  v = 0
  for (i = 2; i <= 7; i++) { d = index("0123456789abcdef", substr(c, i, 1)) - 1; v = v * 16 + d }
  return v
}
/^\{"engine": / {
  e = field($0, "engine")
  order[++nengines] = e
  label[e] = field($0, "label")
  isdep[e] = field($0, "depengine") == "true"
  islimit[e] = field($0, "limit") == "true"
  next
}
/^\{"job": / {
  job = field($0, "job"); group = field($0, "group"); e = field($0, "engine")
  if (!(job in seen)) { seen[job] = 1; jobs[++njobs] = job }
  title[job] = field($0, "title"); params[job] = field($0, "params")
  fig[job] = field($0, "figure"); better[job] = field($0, "better")
  grp[job] = group; series[job] = field($0, "series"); x[job] = field($0, "x")
  med[job, e] = num(field($0, "median"))
  ratio[job, e] = num(field($0, "ratio_vs_depengine"))
  rlow[job, e] = num(field($0, "ratio_min"))
  rhigh[job, e] = num(field($0, "ratio_max"))
  ran[job, e] = 1
}
END {
  # Short names for the x axis.
  for (i = 1; i <= njobs; i++) {
    j = jobs[i]; s = j
    if (j == "W1") s = "W1 chain"
    else if (j == "W2") s = "W2 parallel"
    else if (j == "W3") s = "W3 fan"
    else if (j ~ /^W4\.T/) { s = j; sub(/^W4\.T/, "W4 T=", s); if (fig[j] == "efficiency") s = s "us eff." }
    else if (j == "W5.1") s = "W5 1 op"
    else if (j == "W5.4096") s = "W5 4096 ops"
    else if (j ~ /^W6\.b/) { s = j; sub(/^W6\.b/, "W6 b=", s) }
    else if (j == "MEM") s = "memory/op"
    short[j] = s
  }

  # Advantage: how many times better depengine per-device is than each
  # peer (above 1: depengine better), whatever the direction of the figure;
  # three columns per peer: the median ratio, then the lowest and highest
  # ratio of one repetition (an error bar: how far the machine moved it).
  f = dir "/advantage.dat"
  printf "workload" > f
  for (k = 1; k <= nengines; k++) {
    e = order[k]
    if (isdep[e] || islimit[e]) continue
    peers[++npeers] = e
    printf " \"%s\" low high", label[e] > f
    printf "%s ", colour(e) > (dir "/advantage.colours")
  }
  printf "\n" > f
  for (i = 1; i <= njobs; i++) {
    j = jobs[i]
    if (grp[j] != "table" && grp[j] != "w6" && grp[j] != "memory") continue
    printf "\"%s\"", short[j] > f
    for (k = 1; k <= npeers; k++) {
      r = ratio[j, peers[k]]; lo = rlow[j, peers[k]]; hi = rhigh[j, peers[k]]
      if (r == "?" || r + 0 <= 0) { v = "?"; a = "?"; b = "?" }
      else if (better[j] == "lower") { v = 1 / r; a = (hi == "?" || hi + 0 <= 0) ? v : 1 / hi; b = (lo == "?" || lo + 0 <= 0) ? v : 1 / lo }
      else { v = r; a = (lo == "?") ? v : lo; b = (hi == "?") ? v : hi }
      printf " %s %s %s", v, a, b > f
    }
    printf "\n" > f
  }

  # One bar chart per workload: every engine (and the W6 limits).
  nb = 0
  for (i = 1; i <= njobs; i++) {
    j = jobs[i]
    if (grp[j] != "table" && grp[j] != "w6" && grp[j] != "memory") continue
    nb++
    f = dir "/bars_" nb ".dat"
    unit = fig[j] == "ns_per_op" ? "ns/op" : fig[j] == "bytes_per_op" ? "bytes/op" : fig[j] == "gflops" ? "GFLOP/s" : fig[j]
    print "# " title[j] ", " params[j] "|" unit "|" better[j] > f
    for (k = 1; k <= nengines; k++) {
      e = order[k]
      if (!((j, e) in ran)) continue
      printf "\"%s\" %s %d\n", label[e], med[j, e], hexval(colour(e)) > f
    }
    close(f)
  }
  print nb > (dir "/bars_count")

  # Scaling curves: rows x, columns engines.
  split("W1 W2", names, " ")
  for (n = 1; n <= 2; n++) {
    sname = names[n]
    f = dir "/scale_" sname ".dat"
    ne = 0
    delete cols
    for (k = 1; k <= nengines; k++) {
      e = order[k]
      for (i = 1; i <= njobs; i++) {
        j = jobs[i]
        # An engine with no figure on the curve (skipped everywhere) gets no line.
        if (series[j] == sname && grp[j] == "scale" && ((j, e) in ran) && med[j, e] != "?") { cols[++ne] = e; break }
      }
    }
    printf "x" > f
    for (c = 1; c <= ne; c++) {
      printf " \"%s\"", label[cols[c]] > f
      printf "%s ", colour(cols[c]) > (dir "/scale_" sname ".colours")
    }
    printf "\n" > f
    # x ascending
    np = 0
    for (i = 1; i <= njobs; i++) if (series[jobs[i]] == sname) pts[++np] = jobs[i]
    for (a = 1; a <= np; a++) for (b = a + 1; b <= np; b++) if (x[pts[b]] + 0 < x[pts[a]] + 0) { t = pts[a]; pts[a] = pts[b]; pts[b] = t }
    for (a = 1; a <= np; a++) {
      printf "%s", x[pts[a]] > f
      for (c = 1; c <= ne; c++) printf " %s", ((pts[a], cols[c]) in ran) ? med[pts[a], cols[c]] : "?" > f
      printf "\n" > f
    }
    print ne > (dir "/scale_" sname ".count")
    # The N of W2, the same at every point (--scale changes it): for the x label.
    if (sname == "W2") {
      n_text = "?"
      for (a = 1; a <= np; a++) if (params[pts[a]] ~ /N = /) { n_text = params[pts[a]]; sub(/.*N = /, "", n_text); break }
      print n_text > (dir "/scale_W2.n")
    }
    close(f)
  }
}' "$json"

common='set terminal '"$term"' size 1100,560 font "sans,12"
set datafile missing "?"
set key outside right top
set grid ytics lc rgb "#dddddd"'

# ---------------------------------------------------------------- advantage
npeers=0  # no peer ran (--engines named depengine only): no advantage figure
[ -r "$data/advantage.colours" ] && npeers=$(wc -w < "$data/advantage.colours")
if [ "$npeers" -gt 0 ]; then
  gnuplot <<EOF
$common
set output "$out/peers_advantage.$ext"
set title "How many times better depengine per-device is than each peer (above 1: depengine ahead)\nwhiskers: the lowest and highest ratio of one depengine repetition to the peer repetition run beside it"
set key below horizontal
set style data histograms
set style histogram errorbars gap 1 lw 1
set style fill solid 0.85 border -1
set logscale y 2
set ytics ("1/64" 0.015625, "1/16" 0.0625, "1/4" 0.25, "1" 1, "2" 2, "4" 4, "16" 16, "64" 64, "256" 256)
set xtics rotate by -30 scale 0
set ylabel "x better (log scale)"
colours = "$(cat "$data/advantage.colours")"
plot for [k=1:$npeers] "$data/advantage.dat" using 3*k-1:3*k:3*k+1:xtic(1) title columnheader(3*k-1) lc rgb word(colours, k), \
     1 with lines lc rgb "black" dt 1 notitle, 2 with lines lc rgb "#888888" dt 2 title "2x (issue 4 target on W1-W3, W5)"
EOF
fi

# ---------------------------------------------------------------- per-workload bars
nb=$(cat "$data/bars_count")
if [ "$nb" -gt 0 ]; then
  rows=$(( (nb + 2) / 3 ))
  {
    echo "$common"
    echo "set terminal $term size 1200,$((rows * 330)) font \"sans,10\""
    echo "set output \"$out/peers_bars.$ext\""
    echo "set termoption noenhanced"  # engine names hold underscores
    echo "set multiplot layout $rows,3"
    echo "set style fill solid 0.85 border -1"
    echo "set boxwidth 0.7"
    echo "unset key"
    echo "set xtics rotate by -40 scale 0 font \",8\""
    echo "set yrange [0:*]"
    i=1
    while [ "$i" -le "$nb" ]; do
      f="$data/bars_$i.dat"
      head=$(head -1 "$f" | sed 's/^# //')
      ttl=${head%%|*}
      rest=${head#*|}
      unit=${rest%%|*}
      better=${rest#*|}
      echo "set title \"$ttl\" font \",10\""
      echo "set ylabel \"$unit ($better is better)\""
      echo "plot \"$f\" using 0:2:(0.7):3:xtic(1) with boxes lc rgb variable, \"$f\" using 0:2:(\$2 >= 100 ? sprintf(\"%.0f\", \$2) : sprintf(\"%.3g\", \$2)) with labels offset 0,0.6 font \",8\""
      i=$((i + 1))
    done
    echo "unset multiplot"
  } | gnuplot
fi

# ---------------------------------------------------------------- scaling
for s in W1 W2; do
  n=$(cat "$data/scale_$s.count")
  [ "$n" -gt 0 ] || continue
  if [ "$s" = W1 ]; then
    xl="N, functions on one var (W1 chain)"
    ttl="W1 chain: cost per function as N grows (flat is right)"
  else
    xl="K, vars (W2 parallel, N = $(cat "$data/scale_W2.n") functions round robin over K vars)"
    ttl="W2 parallel: cost per function as the number of vars grows"
  fi
  gnuplot <<EOF
$common
set output "$out/peers_scaling_$(echo $s | tr W w).$ext"
set title "$ttl"
set logscale xy
set format x "10^{%L}"
set xlabel "$xl"
set ylabel "ns per function (log scale)"
set style data linespoints
colours = "$(cat "$data/scale_$s.colours" 2>/dev/null)"
plot for [c=2:$((n + 1))] "$data/scale_$s.dat" using 1:c title columnheader(c) lw 2 pt 7 lc rgb word(colours, c - 1)
EOF
done
echo "plot_peers.sh: figures in $out"
