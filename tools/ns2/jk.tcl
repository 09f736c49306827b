# Järvinen & Kojo, "Evaluating CoDel, PIE, and HRED AQM Techniques with Load Transients"
# (algorithms.md 4.3): the paper's topology and workload as an ns-2.35 script of our own.
#
#   ns jk.tcl aqm=<name> n=<flows per group> seed=<int> duration=<s> rest=<ms> \
#             qtrace=<file> flows=<file> [cwnd=<file>] [window=<pkts>] [g2start=<s>] \
#             [redtrace=<file>]
#
# Topology (one node pair; every flow has its own agents and ports):
#
#   S ==(100 Mbit/s, <rest> ms, DropTail 1000)== R --(2 Mbit/s, 70 ms, <aqm>, 100 pkts)--> C
#                                                R <--(2 Mbit/s, 70 ms, DropTail 100)-- C
#
# Base RTT 2 x (70 + rest) ms: 162 ms for rest = 11 ms, 342 ms for rest = 101 ms. Data flows
# S -> C; the bottleneck queue is R's queue towards C. The 100 Mbit/s server-side link and its
# capacity are our choice (the paper gives only the delays).
#
# Workload: two groups of n simultaneous one-way TCP transfers (Agent/TCP/Sack1 senders,
# Agent/TCPSink/Sack1/DelAck receivers), each group 360000 bytes split equally between its
# flows (remainder one byte each to the first flows, as aqmlab's transient.rs split()). Group 1
# opens its connections at 0 s, group 2 at U(0, 0.65 s) drawn from substream `seed` of an RNG
# of its own (or at `g2start` when given). ns-2.35's defaults apply except: windowInit_ 3, rtxcur_init_
# 3 s (already the ns-2.35 default), packetSize_ 1000 (the default: 1040-byte packets with the
# 40-byte TCP/IP header), window_ (receiver window) 1000 packets = not limiting (ns-2's default
# of 20 packets would cap a flow at about half the path's BDP; the paper does not say), syn_
# true (the default: a 40-byte SYN and its immediate ACK precede the data). Delayed ACKs:
# ns-2's DelAck sink, interval_ 100 ms (default).
#
# AQMs (paper Table I; buffer 100 packets everywhere):
#   droptail                 Queue/DropTail
#   hred_wq0.02, hred_wq0.04 Queue/RED in packet mode (queue_in_bytes_ and bytes_ false, ns-2's
#                            defaults are byte mode): thresh_ 3, maxthresh_ 40, linterm_ 1/0.65,
#                            q_weight_ 0.02 / 0.04, gentle_ true (ns-2 default; paper silent),
#                            mean_pktsize_ 1040 (the data packet size; default 500)
#   codel                    Queue/CoDel (Pollere's ns-2.35 patch): target_ 5 ms, interval_ 100 ms
#   sfq_codel                Queue/sfqCoDel (Nichols/CableLabs 2013): 1024 bins, 5 ms / 100 ms
#   pie, pie_update60ms,     Queue/PIE (Cisco/CableLabs ns-2 code): qdelay_ref_ 20 ms, a_ 0.125,
#   pie_thresh5pkts          b_ 1.25, burst_allowance_ 100 ms, tUpdate_ 30 ms (60 ms), packet mode,
#                            mean_pktsize_ 1040, dq_threshold_ 10 (5) packets = 10400 (5200) bytes
#   pie2013r, pie2013r_*     the same, to be run on the "pie2013r" build: the PIE code with its
#                            2014 guard against resetting a rate measurement removed (our
#                            reconstruction of the 2013 behaviour, tools/ns2/README.md "PIE")
# CoDel, sfqCoDel and PIE exist only in a patched ns-2 (tools/ns2/build-patched-ns2.sh); Debian's
# ns2 package has DropTail and RED.
#
# Outputs: `qtrace` = ns-2 queue trace (+ - d events) of the bottleneck queue only; `flows` =
# one line per flow "flow <group> <k> <bytes> <start_s> <done_s|-1>" plus "meta" lines; `cwnd`
# (optional) = ns-2 variable trace of cwnd_ of group 1's first flow. tools/ns2/jk.py turns
# them into the metrics of docs/metrics.md.

set opt(aqm) droptail
set opt(n) 1
set opt(seed) 1
set opt(duration) 30
set opt(rest) 11
set opt(qtrace) /dev/null
set opt(flows) /dev/stdout
set opt(cwnd) ""
set opt(window) 1000
set opt(g2start) ""
set opt(redtrace) ""
set opt(total) 360000
set opt(jitter) 0.65
foreach a $argv {
    set kv [split $a =]
    if {[llength $kv] != 2 || ![info exists opt([lindex $kv 0])]} {
        puts stderr "jk.tcl: bad argument '$a'"
        exit 2
    }
    set opt([lindex $kv 0]) [lindex $kv 1]
}

set ns [new Simulator]
# Random numbers: ns-2's MRG32k3a. Seeding it with small consecutive integers gives nearly
# linear first draws (seed 1, 2, 3 -> 0.00022, 0.00044, 0.00066 of the range), so each run
# uses substream number `seed` of a fixed package seed instead: defaultRNG (RED's and PIE's
# coin tosses) from base seed 1, group 2's start from its own RNG with base seed 2.
proc substream {rng base k} {
    $rng seed $base
    for {set i 0} {$i < $k} {incr i} { $rng next-substream }
}
global defaultRNG
substream $defaultRNG 1 $opt(seed)

set pktsize 1000
set wire [expr {$pktsize + 40}]

Agent/TCP set windowInit_ 3
Agent/TCP set rtxcur_init_ 3.0
Agent/TCP set packetSize_ $pktsize
Agent/TCP set window_ $opt(window)
Agent/TCP set syn_ true

proc setup_aqm {aqm} {
    global wire
    switch -- $aqm {
        droptail { return DropTail }
        hred_wq0.02 - hred_wq0.04 {
            Queue/RED set queue_in_bytes_ false
            Queue/RED set bytes_ false
            Queue/RED set thresh_ 3
            Queue/RED set maxthresh_ 40
            Queue/RED set linterm_ [expr {1.0 / 0.65}]
            Queue/RED set q_weight_ [expr {$aqm eq "hred_wq0.02" ? 0.02 : 0.04}]
            Queue/RED set gentle_ true
            Queue/RED set mean_pktsize_ $wire
            Queue/RED set setbit_ false
            return RED
        }
        codel {
            Queue/CoDel set target_ 0.005
            Queue/CoDel set interval_ 0.1
            return CoDel
        }
        sfq_codel {
            Queue/sfqCoDel set target_ 0.005
            Queue/sfqCoDel set interval_ 0.1
            Queue/sfqCoDel set maxbins_ 1024
            return sfqCoDel
        }
        pie - pie_update60ms - pie_thresh5pkts -
        pie2013r - pie2013r_update60ms - pie2013r_thresh5pkts {
            Queue/PIE set qdelay_ref_ 0.02
            Queue/PIE set a_ 0.125
            Queue/PIE set b_ 1.25
            Queue/PIE set burst_allowance_ 0.1
            Queue/PIE set tUpdate_ [expr {[string match *update60ms $aqm] ? 0.06 : 0.03}]
            Queue/PIE set mean_pktsize_ $wire
            Queue/PIE set dq_threshold_ [expr {([string match *thresh5pkts $aqm] ? 5 : 10) * $wire}]
            Queue/PIE set bytes_ false
            Queue/PIE set setbit_ false
            return PIE
        }
        default {
            puts stderr "jk.tcl: unknown aqm '$aqm'"
            exit 2
        }
    }
}
set qtype [setup_aqm $opt(aqm)]

set S [$ns node]
set R [$ns node]
set C [$ns node]
$ns duplex-link $S $R 100Mb [expr {$opt(rest) / 1000.0}] DropTail
$ns queue-limit $S $R 1000
$ns queue-limit $R $S 1000
$ns simplex-link $R $C 2Mb 70ms $qtype
$ns queue-limit $R $C 100
$ns simplex-link $C $R 2Mb 70ms DropTail
$ns queue-limit $C $R 100

# Optional: ns-2 RED's own variable trace of the bottleneck queue (redtrace=<file>): lines
# "a <t> <ave_>", "p <t> <prob1_>", "Q <t> <curq_>" (REDQueue::trace, written when a value
# changes; curq_ and ave_ are updated at every arrival).
if {$opt(redtrace) ne "" && $qtype eq "RED"} {
    set redq [[$ns link $R $C] queue]
    set rf [open $opt(redtrace) w]
    $redq attach $rf
    $redq trace ave_
    $redq trace prob1_
    $redq trace curq_
}

set qf [open $opt(qtrace) w]
$ns trace-queue $R $C $qf
set ff [open $opt(flows) w]
puts $ff "meta aqm $opt(aqm) qtype $qtype n $opt(n) seed $opt(seed) duration $opt(duration) rest_ms $opt(rest) window $opt(window) wire_bytes $wire"

# Group 2's start: U(0, jitter) from substream `seed` of its own RNG.
if {$opt(g2start) eq ""} {
    set rng [new RNG]
    substream $rng 2 $opt(seed)
    set u [new RandomVariable/Uniform]
    $u use-rng $rng
    $u set min_ 0
    $u set max_ $opt(jitter)
    set g2 [$u value]
} else {
    set g2 $opt(g2start)
}
puts $ff "meta g2start $g2"

Agent/TCP/Sack1 instproc done {} {
    global ns ff
    $self instvar group_ k_ bytes_sent_ start_
    puts $ff "flow $group_ $k_ $bytes_sent_ $start_ [$ns now]"
    $self set done_ 1
}

set agents {}
foreach {group start} [list 1 0.0 2 $g2] {
    set each [expr {$opt(total) / $opt(n)}]
    set rest [expr {$opt(total) % $opt(n)}]
    for {set k 1} {$k <= $opt(n)} {incr k} {
        set bytes [expr {$each + ($k <= $rest ? 1 : 0)}]
        set tcp [new Agent/TCP/Sack1]
        set sink [new Agent/TCPSink/Sack1/DelAck]
        $ns attach-agent $S $tcp
        $ns attach-agent $C $sink
        $ns connect $tcp $sink
        $tcp set fid_ [expr {$group * 100 + $k}]
        $tcp set group_ $group
        $tcp set k_ $k
        $tcp set bytes_sent_ $bytes
        $tcp set start_ $start
        $tcp set done_ 0
        set ftp [new Application/FTP]
        $ftp attach-agent $tcp
        $ns at $start "$ftp send $bytes"
        lappend agents $tcp
        if {$group == 1 && $k == 1 && $opt(cwnd) ne ""} {
            set cf [open $opt(cwnd) w]
            $tcp attach $cf
            $tcp trace cwnd_
        }
    }
}

proc finish {} {
    global ns ff qf agents
    foreach tcp $agents {
        if {![$tcp set done_]} {
            puts $ff "flow [$tcp set group_] [$tcp set k_] [$tcp set bytes_sent_] [$tcp set start_] -1"
        }
    }
    $ns flush-trace
    close $qf
    close $ff
    exit 0
}
$ns at $opt(duration) "finish"
$ns run
