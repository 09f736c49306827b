// Differential-trace harness for SCReAM's C++ V2 sender (EricssonResearch/scream).
//
// Our own driver, compiled against the library's source files from a checkout given on the
// command line (see build.sh / README.md); none of SCReAM's code lives in this repository.
// It replaces the network by a script: an ideal path with a (stepping) RTT, CE marks on a
// deterministic fraction of packets, and loss windows. Everything else mimics the
// SCReAM BW test tool of the same commit (scream_sender.cpp / scream_receiver.cpp /
// ScreamRx.cpp), driven on a virtual clock in 10 us steps (the tool's usleep(10) polling):
//
//  * video source: a frame every 1/fps; size = rate/fps/8 * (1 + (u - 1/2) * rand/100), rate
//    from getTargetBitrate (-1 after a loss or RTP-queue discard: no frame); packetised into
//    RTP packets of <= mtu payload + 12 B header, marker on the last; each pushed to the
//    library's RtpQueue and announced with newMediaFrame. u comes from a 64-bit LCG (the tool
//    uses C rand(); the LCG is shared with the Rust driver so both see the same sizes).
//  * transmit loop: isOkToTransmit until != -1, the microburst sleep when the accumulated
//    pacing time exceeds the microburst interval (sleep the accumulation if > 1.1x, else the
//    interval), pop, addTransmitted, accumulate its return value.
//  * receiver: a report of the last 64 sequence numbers on a marker, after 32 new packets, or
//    from the 0.5 ms poll when 5 ms (20 ms before the first 100 ms of reception) passed with
//    unreported packets; fed per packet through incomingStandardizedFeedback(..., isLast).
//
// Output: CSV on stdout, one row per --log interval.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>
// The harness reads a few private members (pacing interval, alpha, queue delay) for the trace.
#define private public
#define protected public
#include "RtpQueue.h"
#include "ScreamTx.h"
#undef private
#undef protected

void packet_free(void *, uint32_t) {}

struct Args {
  double duration = 30.0;
  double rtt = 0.025;
  double rtt_step_at = -1, rtt_step_to = 0, rtt_back_at = -1;
  double ce = 0.0, ce_from = 0.0, ce_to = 1e9;
  double loss_from = -1, loss_to = -1;
  int loss_every = 1;
  int ect = 1;  // 1 = ECT(1): L4S mode; 0 = ECT(0) classic; -1 not-ECT
  double rand_pct = 0.0;
  uint64_t seed = 1;
  double max_rate = 100e6, min_rate = 1e6, init_rate = 1e6;
  int mtu = 1360;
  double microburst = 0.0005;
  double fps = 50.0;
  double log_iv = 0.05;
};

static const uint32_t SSRC = 100;

static uint32_t ntp(uint64_t us) { return (uint32_t)((us * 65536ull) / 1000000ull); }

struct Lcg {
  uint64_t x;
  double next() {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(x >> 11) / 9007199254740992.0;
  }
};

struct Pkt {
  uint64_t arrive_us;
  uint16_t seq;
  bool mark;
  bool ce;
};

struct Fb {
  uint64_t arrive_us;
  uint16_t begin;
  std::vector<int64_t> rx_us;  // -1 = not received
  std::vector<bool> ce;
};

int main(int argc, char **argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    double v = atof(argv[i + 1]);
    if (k == "--duration") a.duration = v;
    else if (k == "--rtt") a.rtt = v / 1000;
    else if (k == "--rtt-step-at") a.rtt_step_at = v;
    else if (k == "--rtt-step-to") a.rtt_step_to = v / 1000;
    else if (k == "--rtt-back-at") a.rtt_back_at = v;
    else if (k == "--ce") a.ce = v;
    else if (k == "--ce-from") a.ce_from = v;
    else if (k == "--ce-to") a.ce_to = v;
    else if (k == "--loss-from") a.loss_from = v;
    else if (k == "--loss-to") a.loss_to = v;
    else if (k == "--loss-every") a.loss_every = (int)v;
    else if (k == "--ect") a.ect = (int)v;
    else if (k == "--rand") a.rand_pct = v;
    else if (k == "--seed") a.seed = (uint64_t)v;
    else if (k == "--max-rate") a.max_rate = v * 1e6;
    else if (k == "--mtu") a.mtu = (int)v;
    else if (k == "--microburst") a.microburst = v / 1000;
    else if (k == "--log") a.log_iv = v;
    else { fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  // The BW test tool's construction (scream_sender.cpp, non-fixed-rate branch).
  ScreamV2Tx *tx = new ScreamV2Tx(0.7f, 0.7f, 0.06f, (int)(a.init_rate / 1000 * 100) / 8, 1.5f, 1.5f, 2.0f,
                                  0.05f, a.ect == 1, false, false, false);
  RtpQueue *q = new RtpQueue();
  tx->setCwndMinLow((a.mtu + 12) * 2);
  tx->setPostCongestionDelay(4.0f);
  tx->registerNewStream(q, SSRC, 1.0f, a.min_rate, a.init_rate, a.max_rate, 0.2f, false, 0.0f);

  Lcg rng{a.seed};
  const uint64_t step = 10;
  const uint64_t end_us = (uint64_t)(a.duration * 1e6);
  const uint64_t frame_us = (uint64_t)(1e6 / a.fps);
  uint64_t next_frame = 0, sleep_until = 0, next_log = 0, last_log = 0;
  bool after_sleep = false;
  double acc = 0.0;
  uint16_t seq = 0;
  uint64_t pkt_index = 0;
  double ce_carry = 0.0;
  uint64_t last_arrival = 0;
  std::deque<Pkt> net;
  std::deque<Fb> fbs;
  // Receiver state.
  std::vector<int64_t> rx_at(65536, -1);
  std::vector<bool> rx_ce(65536, false);
  bool rx_any = false;
  uint16_t rx_hi = 0, rx_hi_reported = 0;
  int rx_since = 0;
  uint64_t rx_first = 0, last_fb = 0, last_poll = 0;
  double enc_rate = a.init_rate;
  uint64_t sent_bytes = 0, ce_count = 0, lost = 0;

  auto rtt_at = [&](uint64_t us) {
    double t = us * 1e-6;
    double r = a.rtt;
    if (a.rtt_step_at >= 0 && t >= a.rtt_step_at && !(a.rtt_back_at >= 0 && t >= a.rtt_back_at)) r = a.rtt_step_to;
    return r;
  };
  auto report = [&](uint64_t now) {
    Fb f;
    f.arrive_us = now + (uint64_t)(rtt_at(now) / 2 * 1e6);
    f.begin = (uint16_t)(rx_hi - 63);
    for (int i = 0; i < 64; i++) {
      uint16_t s = (uint16_t)(f.begin + i);
      f.rx_us.push_back(rx_at[s]);
      f.ce.push_back(rx_ce[s]);
    }
    fbs.push_back(f);
    last_fb = now;
    rx_since = 0;
    rx_hi_reported = rx_hi;
  };

  printf("t,target_bps,encoder_bps,pacing_bps,cwnd,bytes_in_flight,queue_delay,srtt,l4s_alpha,rtp_queue_bytes,sent_bps,ce_packets,lost_packets\n");
  for (uint64_t t = 0; t <= end_us; t += step) {
    uint32_t tn = ntp(t);
    // 1. Feedback reaching the sender.
    while (!fbs.empty() && fbs.front().arrive_us <= t) {
      Fb &f = fbs.front();
      int last = 63;
      for (int i = 0; i < 64; i++) {
        if (f.rx_us[i] < 0) continue;
        uint32_t rx = ntp((uint64_t)f.rx_us[i]);
        tx->incomingStandardizedFeedback(tn, 0, rx, (uint16_t)(f.begin + i), f.ce[i] ? 0x03 : 0x01, i == last);
      }
      fbs.pop_front();
    }
    // 2. Packets reaching the receiver.
    while (!net.empty() && net.front().arrive_us <= t) {
      Pkt p = net.front();
      net.pop_front();
      if (!rx_any) { rx_first = t; rx_hi_reported = (uint16_t)(p.seq - 1); rx_any = true; }
      rx_at[p.seq] = (int64_t)t;
      rx_ce[p.seq] = p.ce;
      rx_ce[(uint16_t)(p.seq + 64)] = false;
      rx_at[(uint16_t)(p.seq + 64)] = -1;
      if ((uint16_t)(p.seq - rx_hi) < 32768 || rx_since == 0) rx_hi = p.seq;
      rx_since++;
      if (p.mark || (uint16_t)(rx_hi - rx_hi_reported) >= 32) report(t);
    }
    if (t - last_poll >= 500) {
      last_poll = t;
      uint64_t iv = (t - rx_first < 100000) ? 20000 : 5000;
      if (rx_any && rx_since > 0 && t - last_fb > iv) report(t);
    }
    // 3. Video frames.
    if (t >= next_frame) {
      next_frame += frame_us;
      float r = tx->getTargetBitrate(tn, SSRC);
      enc_rate = r;
      double u = rng.next() - 0.5;
      int bytes = (int)(r / a.fps / 8 * (1.0 + u * a.rand_pct / 100.0));
      uint32_t ts = (uint32_t)(tn / 65536.0 * 90000);
      while (bytes > 0) {
        int pl = std::min(bytes, a.mtu);
        int size = pl + 12;
        bytes = std::max(0, bytes - pl);
        bool mark = bytes == 0;
        q->push((void *)1, size, SSRC, seq, mark, tn / 65536.0f, ts);
        tx->newMediaFrame(tn, SSRC, size, mark);
        seq++;
      }
    }
    // 4. Transmission.
    if (t >= sleep_until) {
      for (;;) {
        if (!after_sleep) {
          uint32_t s;
          float ok = tx->isOkToTransmit(tn, s);
          if (ok == -1.0f) break;
          if (acc > a.microburst) {
            double d = acc > 1.1 * a.microburst ? acc : a.microburst;
            sleep_until = t + (uint64_t)(d * 1e6);
            acc = 0;
            after_sleep = true;
            break;
          }
        }
        after_sleep = false;
        void *buf;
        int size;
        uint32_t ss, ts;
        uint16_t sn;
        bool mark;
        float qd = q->getDelay(tn / 65536.0f);
        if (!q->pop(&buf, size, ss, sn, mark, ts)) break;
        // The scripted network.
        double tsec = t * 1e-6;
        bool drop = tsec >= a.loss_from && tsec < a.loss_to && (pkt_index % a.loss_every) == 0;
        bool ce = false;
        if (tsec >= a.ce_from && tsec < a.ce_to && a.ect >= 0) {
          ce_carry += a.ce;
          if (ce_carry >= 1.0) { ce_carry -= 1.0; ce = true; }
        }
        pkt_index++;
        if (!drop) {
          uint64_t arr = t + (uint64_t)(rtt_at(t) / 2 * 1e6);
          arr = std::max(arr, last_arrival);
          last_arrival = arr;
          net.push_back(Pkt{arr, sn, mark, ce});
          if (ce) ce_count++;
        } else {
          lost++;
        }
        sent_bytes += size;
        float pace = tx->addTransmitted(tn, SSRC, size, sn, mark, qd, ts);
        if (pace > 0) acc += pace;
      }
    }
    // 5. Trace.
    if (t >= next_log) {
      double dt = (t - last_log) * 1e-6;
      ScreamV2Tx::Stream *st = tx->streams[0];
      double pacing = tx->paceInterval > 0 ? tx->getMss() * 8.0 / tx->paceInterval : 0;
      printf("%.3f,%.0f,%.0f,%.0f,%d,%d,%.5f,%.5f,%.5f,%d,%.0f,%llu,%llu\n", t * 1e-6, st->targetBitrate, enc_rate,
             pacing, tx->cwnd, tx->bytesInFlight, tx->queueDelay, tx->sRtt, tx->l4sAlpha, q->bytesInQueue(),
             dt > 0 ? sent_bytes * 8.0 / dt : 0.0, (unsigned long long)ce_count, (unsigned long long)lost);
      sent_bytes = 0;
      last_log = t;
      next_log += (uint64_t)(a.log_iv * 1e6);
    }
  }
  return 0;
}
