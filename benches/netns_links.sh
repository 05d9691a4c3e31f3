#!/usr/bin/env bash
# A sync's cost over emulated links: each rank in a network namespace of its own, joined
# to a router namespace by a veth pair whose rank side is shaped to RATE by tc's tbf, and
# every packet between ranks held for DELAY (one way) by benches/link_delay.py on a TUN
# device in the router (this machine's kernel has no sch_netem). For each number of ranks
# and each link, one process a rank runs the link_sync bench; the table sets rank 0's
# median sync beside the paper model of docs/distributed.md, "What a sync costs".
# Nothing leaves this machine: the addresses (10.91.x.x) exist only inside the
# namespaces, which the script deletes when it ends, also on failure or interruption.
#
# Needs root, iproute2 (ip, tc), python3, and a kernel with veth, tun and sch_tbf.
# Build first (as yourself): cargo bench --locked --no-run --bench link_sync
# Usage: sudo benches/netns_links.sh [RANKS [LINKS]]
#   RANKS: numbers of ranks (default "2 4"); LINKS: RATE:DELAY pairs (default
#   "1gbit:100us 1gbit:1000us 10gbit:100us 10gbit:1000us"); "none:0us" runs the same
#   namespaces unshaped and undelayed, to show this machine's own cost.
#   LINK_SYNC names the bench binary (default: the newest built one).
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
read -r -a rank_counts <<<"${1:-2 4}"
read -r -a links <<<"${2:-1gbit:100us 1gbit:1000us 10gbit:100us 10gbit:1000us}"

missing=()
(( EUID == 0 )) || missing+=("root (run it with sudo)")
command -v ip >/dev/null && command -v tc >/dev/null || missing+=("iproute2 (ip and tc)")
command -v python3 >/dev/null || missing+=("python3")
[[ -c /dev/net/tun ]] || missing+=("/dev/net/tun (the kernel's tun)")
if (( ${#missing[@]} )); then
    echo "netns_links.sh needs $(IFS=,; echo "${missing[*]}" | sed 's/,/, /g')" >&2
    exit 1
fi
binary=${LINK_SYNC:-$(ls -t "$root"/target/release/deps/link_sync-* 2>/dev/null | grep -v '\.d$' | head -n 1 || true)}
if [[ ! -x $binary ]]; then
    echo "no link_sync binary; build it first: cargo bench --locked --no-run --bench link_sync" >&2
    exit 1
fi

prefix="a3g-link-$$"
router="$prefix-router"
scratch=$(mktemp -d)
namespaces=()

# Ends every process still in our namespaces (the ranks, the delay line) and waits up
# to 5 s for them to go, then deletes the namespaces and the scratch folder.
clean_up() {
    local namespace pids tries
    for namespace in "${namespaces[@]}"; do
        for tries in {1..50}; do
            pids=$(ip netns pids "$namespace" 2>/dev/null || true)
            [[ -z $pids ]] && break
            kill -KILL $pids 2>/dev/null || true
            sleep 0.1
        done
    done
    for namespace in "${namespaces[@]}"; do
        ip netns delete "$namespace" 2>/dev/null || true
    done
    rm -rf "$scratch"
}
trap clean_up EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

in_router() { ip netns exec "$router" "$@"; }

# make_namespaces N: the router and N ranks; rank k is 10.91.k.2 on its "uplink", the
# router 10.91.k.1 on "rank<k>". Packets that come in from a rank are routed to the
# TUN device "delay" (table 91), and those the delay line gives back to their rank.
make_namespaces() {
    local ranks=$1 k
    ip netns add "$router" && namespaces+=("$router")
    in_router ip link set lo up
    in_router sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
    # 64000-byte packets: Python moves about 20k packets a second, and the shaping
    # works on bytes, so fewer and larger packets keep the delay line off the path's
    # critical resources.
    in_router ip tuntap add dev delay mode tun
    in_router ip link set delay mtu 64000 up
    in_router ip route add default dev delay table 91
    for k in $(seq 0 $((ranks - 1))); do
        local namespace="$prefix-$k"
        ip netns add "$namespace" && namespaces+=("$namespace")
        ip netns exec "$namespace" ip link set lo up
        in_router ip link add "rank$k" mtu 64000 type veth peer name uplink netns "$namespace"
        in_router ip addr add "10.91.$k.1/24" dev "rank$k"
        in_router ip link set "rank$k" up
        in_router ip rule add iif "rank$k" lookup 91 pref 100
        ip netns exec "$namespace" ip link set uplink mtu 64000
        ip netns exec "$namespace" ip addr add "10.91.$k.2/24" dev uplink
        ip netns exec "$namespace" ip link set uplink up
        ip netns exec "$namespace" ip route add 10.91.0.0/16 via "10.91.$k.1"
    done
}

delete_namespaces() {
    local namespace
    for namespace in "${namespaces[@]}"; do ip netns delete "$namespace"; done
    namespaces=()
}

# shape RANKS RATE: each rank's egress at RATE, or unshaped for "none". The bucket holds
# half a millisecond at the rate, and at least two packets.
shape() {
    local ranks=$1 rate=$2 k bits burst
    for k in $(seq 0 $((ranks - 1))); do
        ip netns exec "$prefix-$k" tc qdisc del dev uplink root 2>/dev/null || true
        [[ $rate == none ]] && continue
        bits=$(tc_bits "$rate")
        burst=$(( bits / 8 / 2000 > 131072 ? bits / 8 / 2000 : 131072 ))
        ip netns exec "$prefix-$k" tc qdisc add dev uplink root tbf rate "$rate" burst "$burst" limit 16777216
    done
}

# tc_bits RATE: "1gbit" → 1000000000.
tc_bits() {
    awk -v r="$1" 'BEGIN { n = r + 0; u = tolower(substr(r, length(n "") + 1));
        m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 1; printf "%d", n * m }'
}

# measure RANKS RATE DELAY_US PORT: starts the ranks (and the delay line unless the delay
# is 0), waits for all, and keeps rank 0's lines.
measure() {
    local ranks=$1 rate=$2 delay_us=$3 port=$4 k delay_line= pids=() failed=0
    in_router ip rule del pref 90 2>/dev/null || true
    if (( delay_us > 0 )); then
        ip netns exec "$router" chrt -f 10 python3 "$root/benches/link_delay.py" delay "$delay_us" &
        delay_line=$!
    else
        # Undelayed: the router forwards between the ranks directly.
        in_router ip rule add pref 90 lookup main
    fi
    for k in $(seq 0 $((ranks - 1))); do
        ip netns exec "$prefix-$k" env RANK="$k" WORLD_SIZE="$ranks" MASTER_ADDR=10.91.0.2 \
            MASTER_PORT="$port" GLOO_SOCKET_IFNAME=uplink timeout 600 "$binary" \
            >"$scratch/rank$k.out" 2>"$scratch/rank$k.err" &
        pids+=($!)
    done
    for k in "${!pids[@]}"; do
        wait "${pids[$k]}" || { failed=1; echo "rank $k failed: $(tail -n 1 "$scratch/rank$k.err")" >&2; }
    done
    if [[ -n $delay_line ]]; then kill "$delay_line"; wait "$delay_line" 2>/dev/null || true; fi
    (( failed == 0 )) || exit 1
    sed "s/^sync /sync ranks=$ranks rate=$rate delay_us=$delay_us /" "$scratch/rank0.out" >>"$scratch/results"
}

echo "link_sync: $binary; $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC')"
port=29600
for ranks in "${rank_counts[@]}"; do
    make_namespaces "$ranks"
    for link in "${links[@]}"; do
        rate=${link%%:*} delay_us=${link#*:}
        delay_us=${delay_us%us}
        shape "$ranks" "$rate"
        echo "$ranks ranks, $rate, ${delay_us} us one way" >&2
        measure "$ranks" "$rate" "$delay_us" $((port++))
    done
    delete_namespaces
done

# The paper model: 2(N-1)/N times the model over each link at its rate, in 2(N-1) steps
# of the one-way delay each. The corrected one: the same bytes, in 3(N-1) steps (the
# gather's N-1 too) of a round trip each, since Gloo sends only once the receiver has
# said it is ready.
awk '
function field(name,   i, kv) { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == name) return kv[2] } }
function shown(ms) { return bps > 0 ? sprintf("%.2f ms (%.2fx)", ms, field("median_ms") / ms) : "-" }
BEGIN { print "| ranks | link | network | sync, median (least) | paper model | corrected model |"
        print "| --- | --- | --- | --- | --- | --- |" }
{
    n = field("ranks"); rate = field("rate"); d = field("delay_us") / 1e6
    r = rate + 0; u = tolower(substr(rate, length(r "") + 1))
    bps = (u == "gbit") ? r * 1e9 : (u == "mbit") ? r * 1e6 : 0
    transfer = bps > 0 ? 2 * (n - 1) / n * field("parameters") * 32 / bps : 0
    paper = transfer + 2 * (n - 1) * d
    corrected = transfer + 3 * (n - 1) * 2 * d
    printf "| %d | %s, %d us | %s | %.2f ms (%.2f) | %s | %s |\n", n, rate, d * 1e6, field("network"),
        field("median_ms"), field("min_ms"), shown(paper * 1e3), shown(corrected * 1e3)
}' "$scratch/results"
