// The ns-3 side of bench/compare_ns3.py: the dumbbell aqmlab runs for `[bottleneck] rate,
// qdisc` + `[[flows]] cc = "cubic", rtt, count`, written against ns-3 3.44 (PyPI wheel `ns3`,
// its headers and shared libraries; compare_ns3.py builds this file with g++).
//
// Topology (aqmlab's, docs/path.md "Topology"):
//
//   sender --(access: 100 Gbit/s, rtt/2)-- left --(bottleneck: rate, 0 delay)-- right --(100 Gbit/s, 0)-- receiver
//
// aqmlab's per-flow base delay (half the RTT each way) is the sender's access link, whose
// 100 Gbit/s stands in for aqmlab's delay lines (pure delay, no serialisation). The bottleneck's
// forward device carries the named queue disc; its reverse device (the ACKs' return link, at
// the same rate as in aqmlab by default) a 10000-packet FIFO (aqmlab's `[return]` default
// `pfifo limit 10000`). The access devices have no queue disc (removed after address
// assignment) and a device queue long enough never to drop; the bottleneck devices hold one
// packet so that the queue disc holds the queue (as Linux with BQL).
//
// TCP: TcpCubic, segment 1448 bytes (MSS with timestamps), initial window 10, SACK, delayed
// ACK every 2 segments, min RTO 200 ms (Linux), one BulkSend application per flow starting at
// U[0, spread) (aqmlab's [host] start_spread). Printed: one JSON line with the simulation's
// wall and CPU time (Simulator::Run only), the packets the bottleneck sent, events and goodputs.
//
// Differences that remain (documented in docs/performance.md): a point-to-point frame is
// 1502 bytes (PPP header) where aqmlab serialises 1514 (Ethernet), ns-3's TCP is its own
// model (no GSO, its CUBIC/HyStart), and aqmlab's per-packet host jitter is not modelled.

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <chrono>
#include <ctime>
#include <cstdio>
#include <string>
#include <vector>

using namespace ns3;

int
main(int argc, char* argv[])
{
    auto tStart = std::chrono::steady_clock::now();
    double rateMbps = 50;
    double rttMs = 20;
    uint32_t flows = 2;
    std::string qdisc = "fq_codel";
    uint32_t limit = 0; // 0: the discipline's default
    double duration = 60;
    uint32_t segment = 1448;
    uint32_t bufBytes = 4 << 20;
    uint32_t seed = 1;
    double spreadMs = 5;

    CommandLine cmd(__FILE__);
    cmd.AddValue("rate", "bottleneck rate, Mbit/s", rateMbps);
    cmd.AddValue("rtt", "base RTT, ms", rttMs);
    cmd.AddValue("flows", "CUBIC flows", flows);
    cmd.AddValue("qdisc", "fq_codel | pfifo | codel", qdisc);
    cmd.AddValue("limit", "queue disc limit in packets (0: default)", limit);
    cmd.AddValue("duration", "simulated seconds", duration);
    cmd.AddValue("segment", "TCP segment size, bytes", segment);
    cmd.AddValue("buf", "socket send and receive buffer, bytes", bufBytes);
    cmd.AddValue("seed", "run number", seed);
    cmd.AddValue("spread", "flow start spread, ms", spreadMs);
    cmd.Parse(argc, argv);

    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(seed);

    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpCubic::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(segment));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(bufBytes));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(bufBytes));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(200)));

    NodeContainer nodes;
    nodes.Create(4); // 0 sender, 1 left router, 2 right router, 3 receiver
    InternetStackHelper stack;
    stack.Install(nodes);

    PointToPointHelper access;
    access.SetDeviceAttribute("DataRate", DataRateValue(DataRate("100Gbps")));
    access.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", QueueSizeValue(QueueSize("1000000p")));
    access.SetChannelAttribute("Delay", TimeValue(NanoSeconds(int64_t(rttMs * 1e6 / 2))));
    NetDeviceContainer dSend = access.Install(nodes.Get(0), nodes.Get(1));
    access.SetChannelAttribute("Delay", TimeValue(Seconds(0)));
    NetDeviceContainer dRecv = access.Install(nodes.Get(2), nodes.Get(3));

    PointToPointHelper bottleneck;
    bottleneck.SetDeviceAttribute("DataRate", DataRateValue(DataRate(uint64_t(rateMbps * 1e6))));
    bottleneck.SetChannelAttribute("Delay", TimeValue(Seconds(0)));
    bottleneck.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", QueueSizeValue(QueueSize("1p")));
    NetDeviceContainer dBn = bottleneck.Install(nodes.Get(1), nodes.Get(2));

    TrafficControlHelper fwd;
    if (qdisc == "fq_codel")
    {
        fwd.SetRootQueueDisc("ns3::FqCoDelQueueDisc",
                             "MaxSize",
                             QueueSizeValue(QueueSize(std::to_string(limit ? limit : 10240) + "p")),
                             "UseEcn",
                             BooleanValue(false));
    }
    else if (qdisc == "pfifo")
    {
        fwd.SetRootQueueDisc("ns3::FifoQueueDisc",
                             "MaxSize",
                             QueueSizeValue(QueueSize(std::to_string(limit ? limit : 1000) + "p")));
    }
    else if (qdisc == "codel")
    {
        fwd.SetRootQueueDisc("ns3::CoDelQueueDisc",
                             "MaxSize",
                             QueueSizeValue(QueueSize(std::to_string(limit ? limit : 1000) + "p")),
                             "UseEcn",
                             BooleanValue(false));
    }
    else
    {
        std::fprintf(stderr, "dumbbell: --qdisc %s: expected fq_codel, pfifo or codel\n", qdisc.c_str());
        return 2;
    }
    QueueDiscContainer qFwd = fwd.Install(dBn.Get(0));
    TrafficControlHelper rev;
    rev.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", QueueSizeValue(QueueSize("10000p")));
    rev.Install(dBn.Get(1));

    Ipv4AddressHelper addr;
    addr.SetBase("10.1.1.0", "255.255.255.0");
    addr.Assign(dSend);
    addr.SetBase("10.1.2.0", "255.255.255.0");
    addr.Assign(dBn);
    addr.SetBase("10.1.3.0", "255.255.255.0");
    Ipv4InterfaceContainer iRecv = addr.Assign(dRecv);
    TrafficControlHelper none;
    none.Uninstall(dSend);
    none.Uninstall(dRecv);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    Ptr<UniformRandomVariable> start = CreateObject<UniformRandomVariable>();
    std::vector<Ptr<PacketSink>> sinks;
    std::vector<double> starts;
    for (uint32_t i = 0; i < flows; i++)
    {
        uint16_t port = 10000 + i;
        PacketSinkHelper sinkHelper("ns3::TcpSocketFactory",
                                    InetSocketAddress(Ipv4Address::GetAny(), port));
        ApplicationContainer s = sinkHelper.Install(nodes.Get(3));
        s.Start(Seconds(0));
        sinks.push_back(DynamicCast<PacketSink>(s.Get(0)));
        BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(iRecv.GetAddress(1), port));
        bulk.SetAttribute("MaxBytes", UintegerValue(0));
        bulk.SetAttribute("SendSize", UintegerValue(segment));
        ApplicationContainer a = bulk.Install(nodes.Get(0));
        double t = start->GetValue(0, spreadMs * 1e-3);
        starts.push_back(t);
        a.Start(Seconds(t));
    }
    Simulator::Stop(Seconds(duration));

    timespec c0;
    timespec c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    auto t0 = std::chrono::steady_clock::now();
    Simulator::Run();
    auto t1 = std::chrono::steady_clock::now();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);

    QueueDisc::Stats st = qFwd.Get(0)->GetStats();
    std::printf("{\"sim_wall_s\": %.6f, \"sim_cpu_s\": %.6f, \"setup_wall_s\": %.6f, \"events\": %llu, "
                "\"bottleneck_packets\": %llu, \"bottleneck_drops\": %llu, \"goodput_mbps\": [",
                std::chrono::duration<double>(t1 - t0).count(),
                (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9,
                std::chrono::duration<double>(t0 - tStart).count(),
                (unsigned long long)Simulator::GetEventCount(),
                (unsigned long long)st.nTotalSentPackets,
                (unsigned long long)st.nTotalDroppedPackets);
    for (uint32_t i = 0; i < flows; i++)
    {
        double mbps = sinks[i]->GetTotalRx() * 8.0 / (duration - starts[i]) / 1e6;
        std::printf("%s%.6f", i ? ", " : "", mbps);
    }
    std::printf("]}\n");
    Simulator::Destroy();
    return 0;
}
