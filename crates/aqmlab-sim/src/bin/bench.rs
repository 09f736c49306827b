//! `make bench`: engine throughput and its scaling with the number of flows (issues #2, #15).
//!
//! Cases: (a) 50 Mbit/s, 20 ms, 2 CUBIC, fq_codel, 60 s (the studies' dumbbell);
//! 1 Gbit/s, 20 ms, CUBIC, fq_codel, 10 s at 1, 10, 100, 1000 and 10,000 flows; and r1000,
//! 1000 flows in the 10 flows' regime (each flow's rate and window as in f10: 100 Gbit/s,
//! fq_codel's limits x100, 0.5 s).
//!
//! Every run of every case is a fresh child process (this binary re-executed with
//! `--child <case>`), so each case's peak RSS (`getrusage(RUSAGE_SELF).ru_maxrss`) is its own.
//! The machine is shared: each case runs `--repeat N` times (default 3) and the table shows
//! the minimum engine wall time (the least disturbed run) and the largest peak RSS.
//!
//! Columns: bottleneck packets (dequeued by the forward bottleneck), engine wall seconds
//! (`Simulation::run`, scenario parsing and building excluded; `build s` is `Simulation::new`),
//! the CPU seconds (user + system) of the run (less disturbed by other processes than wall),
//! bottleneck packets per wall-second, ns per bottleneck packet, events per packet, peak RSS.
//! Last lines: the cost per packet at 1000 flows over that at 10 flows (issue #15: <= 1.3),
//! at 1 Gbit/s (f1000, another regime too) and in f10's regime (r1000).
//!
//! `aqmlab-bench [--repeat N] [FILTER...]` runs the cases whose key contains a filter
//! (keys: a, f1, f10, f100, f1000, f10000, r1000).
//!
//! Where the time goes (callgrind instructions, perf cycles; Nov 2026, after the radix event
//! queue and the per-flow memory work): scenario (a) runs ~3150 instructions per bottleneck
//! packet, spread flat: the event loop and packet forwarding (`run_until` with the queue
//! inlined) 26 %, the TCP sender's ACK processing 10 % self (28 % with its output path), link
//! serialisation and dequeue 9 %, delay lines and element dispatch 16 %, fq_codel/CoDel 13 %.
//! 2.57 events per packet: the bottleneck's and the return link's transmission ends, one
//! delay-line exit per GSO burst and per ACK. With 1000 flows the instructions per packet
//! grow 1.4x (more events per packet: less GSO batching, more timers) but the time per packet
//! ~3.5x: cache misses on per-flow state (delay line and its host-jitter stream, scoreboard
//! ring, sender, fq_codel bucket), the top samples in `Element::receive` are the jitter box.
//! Session 5's profile of (a) (events per packet by kind, instructions by part, what was
//! tried): docs/performance.md, "The per-packet path".
//!
//! Since (perf2 round, perf record cpu-clock + annotate at 1000 flows; CPU and wall times
//! on the shared 2-core machine vary by 2x between runs, so shares of samples are the
//! steadier measure): the host jitter lives inside the delay line with its draws batched
//! in one cache line (was ~3 misses a draw: box header, ChaCha block index, block word;
//! f1000 CPU 1.435 -> 1.290 s, f100 0.651 -> 0.548 s in the same hour; cachegrind, which
//! the load does not disturb, f1000: instructions +0.15 %, D1 misses 55.6 M -> 53.2 M,
//! D1 read misses 39.7 M -> 37.3 M, ~2.9 fewer per bottleneck packet); fq_codel's
//! dequeue prefetches the next flow's head packet and the flow after that's queue header
//! (dequeue's share of samples 10.5 % -> 6.7 %; what is left there is the prefetch
//! instruction itself, likely a TLB walk: the rings are scattered over ~30 MB).
//! Both together, base (5dc652b) and final binaries alternating, min of 5 child runs' CPU
//! s (scenario parsing and build included): (a) 0.136 -> 0.117, f10 0.401 -> 0.403, f100
//! 0.562 -> 0.575, f1000 1.117 -> 1.031, f10000 3.61 -> 3.76 (min of 2-5, within the
//! noise); 1000 flows / 10 flows per packet 2.79 -> 2.56: far from the 1.3 target.
//! Left at 1000 flows, each ~5 % of samples and each one miss: the delay line's ring slot
//! read by `wake` (the packet), the sender's scoreboard entry in `ts_unlink` (a 72-byte
//! entry per segment, read once per ACKed segment), fq_codel's enqueue into the flow's
//! ring, and the event loop's element/flow lookups in `run_until`.
//!
//! Session 5 (docs/performance.md, "Cost per packet against the number of flows"): at 1000
//! flows 1.54x the events per packet (per-flow delay-line wake-ups no longer batched, more
//! pure ACKs, ~130 k early RTO/TLP fires and ~160 k delayed-ACK timers per 10 s) and 1.53x
//! the instructions, `pop_due` 325 instructions a pop against 166 at 10 flows (the radix
//! heap moves far-future timers down bucket by bucket; a 4-ary heap was worse: f1000
//! 3.83 G -> 4.66 G instructions), 2.3x the L1 misses: the route (now one cache line), the
//! endpoint's first line, the element table, the delay lines' ring slots, the sender.

use aqmlab_sim::{Scenario, Simulation};
use std::process::Command;
use std::time::Instant;

struct Case {
    key: &'static str,
    label: &'static str,
    duration: &'static str,
    rate: &'static str,
    flows: u32,
    qdisc: &'static str,
}

/// fq_codel as every case but `r1000` runs it (Linux's defaults: limit 10240, 1024 buckets,
/// 32 MB memory limit).
const FQ_CODEL: &str = "fq_codel";

/// `r1000`'s fq_codel: the limits of [`FQ_CODEL`] scaled with the link rate (x100, the
/// memory limit to its maximum, 2^31 bytes), and 65536 buckets so that 1000 flows share few
/// buckets (about 8 pairs, as 10 flows in 1024 buckets share almost none). Without this the
/// standing queue of 1000 flows at 100 Gbit/s (5 ms target, about 41,000 packets) would hit
/// the 10240-packet limit, a regime f10 never sees.
const FQ_CODEL_X100: &str = "fq_codel limit 1024000 flows 65536 memory_limit 2147483648";

const CASES: [Case; 7] = [
    Case { key: "a", label: "a: 50Mbit 20ms 2xCUBIC fq_codel 60s", duration: "60s", rate: "50Mbit", flows: 2, qdisc: FQ_CODEL },
    Case { key: "f1", label: "1Gbit 20ms 1xCUBIC fq_codel 10s", duration: "10s", rate: "1Gbit", flows: 1, qdisc: FQ_CODEL },
    Case { key: "f10", label: "1Gbit 20ms 10xCUBIC fq_codel 10s", duration: "10s", rate: "1Gbit", flows: 10, qdisc: FQ_CODEL },
    Case { key: "f100", label: "1Gbit 20ms 100xCUBIC fq_codel 10s", duration: "10s", rate: "1Gbit", flows: 100, qdisc: FQ_CODEL },
    Case { key: "f1000", label: "1Gbit 20ms 1000xCUBIC fq_codel 10s", duration: "10s", rate: "1Gbit", flows: 1000, qdisc: FQ_CODEL },
    Case { key: "f10000", label: "1Gbit 20ms 10000xCUBIC fq_codel 10s", duration: "10s", rate: "1Gbit", flows: 10_000, qdisc: FQ_CODEL },
    // 1000 flows in f10's regime: each flow's share (100 Mbit/s), window and BDP (about 165
    // packets at 20 ms) as in f10, where f1000 (1 Mbit/s, 1.7 packets of window per flow) is
    // another regime as well: losses on 8 % of its packets against 0.006 % in f10, more
    // recovery per packet. 100 times f10's packets in flight, so the packet count per second
    // is 100 times f10's too: 0.5 s (25 RTTs, about 3.4 M bottleneck packets, the first few
    // RTTs in slow start) rather than the 0.1 s that would give f10's count but be slow start
    // throughout (docs/performance.md, "Session 9: ns-3 ratios, PGO and the flow-count regime").
    Case { key: "r1000", label: "100Gbit 20ms 1000xCUBIC fq_codel*100 0.5s", duration: "500ms", rate: "100Gbit", flows: 1000, qdisc: FQ_CODEL_X100 },
];

impl Case {
    fn scenario(&self) -> String {
        format!(
            "duration = \"{}\"\n[bottleneck]\nrate = \"{}\"\nqdisc = \"{}\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\ncount = {}\n",
            self.duration, self.rate, self.qdisc, self.flows
        )
    }
}

/// `struct rusage` of Linux (64-bit): two `timeval`s, then `ru_maxrss` (KiB) and 13 more longs.
#[repr(C)]
struct Rusage {
    utime: [i64; 2],
    stime: [i64; 2],
    maxrss: i64,
    rest: [i64; 13],
}

extern "C" {
    fn getrusage(who: i32, usage: *mut Rusage) -> i32;
}

/// This process's resource use: (peak resident set size in KiB, user + system CPU seconds).
fn rusage() -> (u64, f64) {
    let mut u = Rusage { utime: [0; 2], stime: [0; 2], maxrss: 0, rest: [0; 13] };
    // SAFETY: `u` has the layout of Linux's `struct rusage`; RUSAGE_SELF = 0.
    let rc = unsafe { getrusage(0, &mut u) };
    if rc != 0 {
        return (0, 0.0);
    }
    let secs = |tv: [i64; 2]| tv[0] as f64 + tv[1] as f64 * 1e-6;
    (u.maxrss as u64, secs(u.utime) + secs(u.stime))
}

/// One run of a case in this process; prints `build_s wall_s packets events rss_kib cpu_s`.
fn child(key: &str) {
    let case = CASES.iter().find(|c| c.key == key).expect("known case");
    let sc = Scenario::from_toml(&case.scenario(), &[]).expect("bench scenario is valid");
    let t0 = Instant::now();
    let sim = Simulation::new(&sc);
    let build = t0.elapsed().as_secs_f64();
    let cpu0 = rusage().1;
    let t1 = Instant::now();
    let out = sim.run();
    let wall = t1.elapsed().as_secs_f64();
    let (rss, cpu1) = rusage();
    println!("{build} {wall} {} {} {rss} {}", out.summary.bottleneck.packets, out.summary.events, cpu1 - cpu0);
}

struct Row {
    build: f64,
    wall: f64,
    pkts: u64,
    events: u64,
    rss_kib: u64,
    cpu: f64,
}

/// The glibc tunable that backs the heap with transparent huge pages (glibc >= 2.35 madvises
/// its heap and mmapped chunks `MADV_HUGEPAGE`; older glibc and other C libraries ignore it).
const HUGEPAGE_TUNABLE: &str = "glibc.malloc.hugetlb=1";

/// `GLIBC_TUNABLES` for the children: `current` with [`HUGEPAGE_TUNABLE`] added, as the
/// `aqmlab` command runs its engine (`python/aqmlab/launch.py`: with 1000 flows the per-flow
/// state spans tens of MB, far beyond what the TLB maps in 4 KiB pages; docs/performance.md,
/// "Session 10: huge pages"). `None`: leave it as it is (`AQMLAB_HUGEPAGES=0`, or a
/// `glibc.malloc.hugetlb` setting of the caller's own).
fn children_tunables(current: Option<&str>, hugepages: Option<&str>) -> Option<String> {
    if hugepages == Some("0") || current.is_some_and(|c| c.split(':').any(|t| t.starts_with("glibc.malloc.hugetlb="))) {
        return None;
    }
    Some(match current.filter(|c| !c.is_empty()) {
        Some(c) => format!("{c}:{HUGEPAGE_TUNABLE}"),
        None => HUGEPAGE_TUNABLE.to_string(),
    })
}

/// `repeat` runs of case `key`, each a child process, with `tunables` as its
/// `GLIBC_TUNABLES` (`None`: the caller's).
fn run_case(key: &str, repeat: usize, tunables: Option<&str>) -> Row {
    let exe = std::env::current_exe().expect("own path");
    let mut best: Option<Row> = None;
    for _ in 0..repeat {
        let mut cmd = Command::new(&exe);
        cmd.args(["--child", key]);
        if let Some(t) = tunables {
            cmd.env("GLIBC_TUNABLES", t);
        }
        let out = cmd.output().expect("child runs");
        assert!(out.status.success(), "case {key} failed: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let f: Vec<&str> = text.split_whitespace().collect();
        let r = Row { build: f[0].parse().unwrap(), wall: f[1].parse().unwrap(), pkts: f[2].parse().unwrap(), events: f[3].parse().unwrap(), rss_kib: f[4].parse().unwrap(), cpu: f[5].parse().unwrap() };
        best = Some(match best {
            None => r,
            Some(b) => Row {
                build: b.build.min(r.build),
                wall: b.wall.min(r.wall),
                pkts: r.pkts,
                events: r.events,
                rss_kib: b.rss_kib.max(r.rss_kib),
                cpu: b.cpu.min(r.cpu),
            },
        });
    }
    best.expect("repeat >= 1")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        child(&args[1]);
        return;
    }
    let mut repeat = 3;
    let mut filters = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--repeat" {
            repeat = it.next().and_then(|n| n.parse().ok()).filter(|&n| n >= 1).expect("--repeat N (N >= 1)");
        } else {
            filters.push(a.clone());
        }
    }
    println!("each case: {repeat} runs in fresh processes; minimum wall and CPU time, maximum peak RSS (shared machine)");
    let tunables = children_tunables(std::env::var("GLIBC_TUNABLES").ok().as_deref(), std::env::var("AQMLAB_HUGEPAGES").ok().as_deref());
    match &tunables {
        Some(t) => println!("children run with GLIBC_TUNABLES={t} (heap on transparent huge pages, as `aqmlab` runs; AQMLAB_HUGEPAGES=0: off)"),
        None => println!("children run with the caller's GLIBC_TUNABLES (huge pages as the caller set them)"),
    }
    println!(
        "{:<42} {:>10} {:>8} {:>8} {:>8} {:>12} {:>8} {:>8} {:>9}",
        "case", "bneck pkts", "build s", "wall s", "cpu s", "pkt/wall-s", "ns/pkt", "ev/pkt", "RSS MiB"
    );
    let mut ns_per_pkt = std::collections::HashMap::new();
    for case in CASES.iter().filter(|c| filters.is_empty() || filters.iter().any(|f| f == c.key)) {
        let r = run_case(case.key, repeat, tunables.as_deref());
        let ns = r.wall * 1e9 / r.pkts as f64;
        ns_per_pkt.insert(case.key, (ns, r.cpu * 1e9 / r.pkts as f64));
        println!(
            "{:<42} {:>10} {:>8.3} {:>8.3} {:>8.3} {:>12.0} {:>8.1} {:>8.2} {:>9.1}",
            case.label,
            r.pkts,
            r.build,
            r.wall,
            r.cpu,
            r.pkts as f64 / r.wall,
            ns,
            r.events as f64 / r.pkts as f64,
            r.rss_kib as f64 / 1024.0
        );
    }
    if let (Some(a), Some(b)) = (ns_per_pkt.get("f1000"), ns_per_pkt.get("f10")) {
        println!("cost per packet, 1000 flows / 10 flows: wall {:.2}, CPU {:.2} (target <= 1.3; CPU is steadier on a shared machine)", a.0 / b.0, a.1 / b.1);
    }
    if let (Some(a), Some(b)) = (ns_per_pkt.get("r1000"), ns_per_pkt.get("f10")) {
        println!("cost per packet, 1000 flows in 10 flows' regime (r1000) / 10 flows: wall {:.2}, CPU {:.2}", a.0 / b.0, a.1 / b.1);
    }
}

#[cfg(test)]
mod tests {
    use super::children_tunables;

    /// The tunable is added to the caller's, unless turned off or set by the caller.
    #[test]
    fn huge_pages_tunable_is_added_unless_set_or_off() {
        assert_eq!(children_tunables(None, None).as_deref(), Some("glibc.malloc.hugetlb=1"));
        assert_eq!(children_tunables(Some(""), None).as_deref(), Some("glibc.malloc.hugetlb=1"));
        assert_eq!(children_tunables(Some("glibc.malloc.arena_max=2"), Some("1")).as_deref(), Some("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"));
        assert_eq!(children_tunables(Some("glibc.malloc.hugetlb=0"), None), None);
        assert_eq!(children_tunables(Some("x=1:glibc.malloc.hugetlb=2"), None), None);
        assert_eq!(children_tunables(None, Some("0")), None);
    }
}
