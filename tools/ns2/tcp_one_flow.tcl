# One ns-2.35 Agent/TCP/Sack1 flow into Agent/TCPSink/Sack1/DelAck over the Järvinen & Kojo
# path (2 Mbit/s, 70 ms + 11 ms one way), for the ns2-2013 TCP model's reference test
# (crates/aqmlab-sim/tests/integration/tcp_ns2.rs). Our own script.
#   ns tools/ns2/tcp_one_flow.tcl <packets> <queue-limit>
# prints: done <time of the last ACK, s> rexmit <retransmitted packets> ndatapack <packets sent>
# ns-2 defaults apply except windowInit_ 3 (the study's IW) and window_ 100000 (not limiting).
set npk [lindex $argv 0]
set qlim [lindex $argv 1]
set ns [new Simulator]
set n0 [$ns node]; set n1 [$ns node]; set n2 [$ns node]
$ns duplex-link $n0 $n1 1000Mb 11ms DropTail
$ns duplex-link $n1 $n2 2Mb 70ms DropTail
$ns queue-limit $n1 $n2 $qlim
$ns queue-limit $n0 $n1 1000
Agent/TCP set window_ 100000
Agent/TCP set windowInit_ 3
set tcp [new Agent/TCP/Sack1]
set sink [new Agent/TCPSink/Sack1/DelAck]
$ns attach-agent $n0 $tcp; $ns attach-agent $n2 $sink; $ns connect $tcp $sink
proc done {} { global ns tcp; puts "done [$ns now] rexmit [$tcp set nrexmitpack_] ndatapack [$tcp set ndatapack_]" }
$tcp proc done {} { done }
set ftp [new Application/FTP]; $ftp attach-agent $tcp
$ns at 0.0 "$ftp send [expr $npk*1000]"
$ns at 60 "exit 0"
$ns run
