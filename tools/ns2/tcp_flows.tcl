# k ns-2.35 Agent/TCP/Sack1 flows into Agent/TCPSink/Sack1/DelAck sinks over the Järvinen &
# Kojo path, for the ns2-2013 TCP model's reference test
# (crates/aqmlab-sim/tests/integration/tcp_ns2.rs). Our own script.
#   ns tools/ns2/tcp_flows.tcl <k flows> <packets per flow> <queue-limit>
# Flow i starts at i x 100 ms and sends <packets> x 1000 bytes (FTP send). Prints per flow,
# in completion order: done <i> <time of its last ACK, s> rexmit <retransmitted packets>.
# Path: sender -1 Gbit/s, 11 ms- router -2 Mbit/s, 70 ms, DropTail <queue-limit>- receiver
# (ACKs return over the same links). ns-2 defaults apply except windowInit_ 3 (the study's
# initial window) and window_ 100000 (not limiting).
set k [lindex $argv 0]; set npk [lindex $argv 1]; set qlim [lindex $argv 2]
set ns [new Simulator]
set n0 [$ns node]; set n1 [$ns node]; set n2 [$ns node]
$ns duplex-link $n0 $n1 1000Mb 11ms DropTail
$ns duplex-link $n1 $n2 2Mb 70ms DropTail
$ns queue-limit $n1 $n2 $qlim
$ns queue-limit $n0 $n1 1000
Agent/TCP set window_ 100000
Agent/TCP set windowInit_ 3
for {set i 0} {$i < $k} {incr i} {
  set tcp($i) [new Agent/TCP/Sack1]; set sink($i) [new Agent/TCPSink/Sack1/DelAck]
  $ns attach-agent $n0 $tcp($i); $ns attach-agent $n2 $sink($i); $ns connect $tcp($i) $sink($i)
  $tcp($i) proc done {} "global ns; puts \"done $i \[\$ns now\] rexmit \[$tcp($i) set nrexmitpack_\]\""
  set ftp($i) [new Application/FTP]; $ftp($i) attach-agent $tcp($i)
  $ns at [expr $i*0.1] "$ftp($i) send [expr $npk*1000]"
}
$ns at 60 "exit 0"
$ns run
