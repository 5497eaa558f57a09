# Shared by the lent-GPU scripts (session.sh, llm_session.sh, quant_session.sh), sourced from the
# repository root there: a deadline DEADLINE_S from when it is sourced (default $1), results in
# /tmp/r tarred to $OUT/results.tar by `save`, `step` headings with the elapsed seconds, and
# `lim N`: N seconds or what is left of the deadline (at least 5).
T0=$(date +%s); D=${DEADLINE_S:-$1}
O=${OUT:-/tmp/out}; R=/tmp/r; mkdir -p "$O" "$R"
left() { echo $(( D - ($(date +%s) - T0) )); }
save() { tar -C /tmp -cf "$O/results.tar" r; }
step() { echo "=== [$(( $(date +%s) - T0 ))s] $*"; }
lim() { local l; l=$(left); (( l > $1 )) && echo "$1" || echo $(( l > 5 ? l : 5 )); }
