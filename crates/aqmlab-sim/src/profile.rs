//! Era profiles (`stack = "..."` in a scenario): which version of each algorithm runs.
//!
//! aqmlab's models follow today's Linux unless told otherwise; the published testbed studies
//! ran 2020-2024 kernels whose Prague, DualPI2 and send path differ from today's in ways that
//! change their results. A profile names the kernel a study ran; each algorithm whose
//! behaviour differed in that kernel reads the profile when it is built and takes that
//! version's defaults. A parameter given explicitly in the scenario always wins over a
//! profile's default. What each profile changes, and the source read for it, is listed on
//! each algorithm's page in `docs/algorithms/` and in `docs/profiles.md`.

use serde::{Deserialize, Deserializer};
use std::fmt;
use std::str::FromStr;

/// A named software stack: the kernel (and its qdiscs and TCP) a study ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Stack {
    /// Today's Linux, as the engine models it (the default).
    #[default]
    Linux,
    /// L4STeam/linux@b256daed (4 Aug 2020): the kernel of heistp/l4s-tests' flent runs.
    /// Base Linux 5.4-rc3 (evidence: `cc::cubic::CubicVersion::for_stack`).
    L4steam2020,
    /// L4STeam/linux@e741f5ac (8 Apr 2020; the re-run used 1014c0e4, 24 Apr 2020): the L4S
    /// side of heistp/sce-l4s-ect1. Base Linux 5.4-rc3, as `L4steam2020`.
    L4steam2020Apr,
    /// chromi/sce@0eddf2ad (9 Mar 2020): the SCE side of heistp/sce-l4s-ect1. Base Linux v5.4.
    Sce2020,
    /// The L4STeam kernel of autumn 2024 (5.15 based): the SCReAM over DualPi2 test record.
    L4steam2024,
    /// ns-2.35 with the 2012-2013 AQM code (Pollere's CoDel and sfqCoDel, Cisco's PIE, ns-2
    /// RED as HRED): the Järvinen & Kojo load-transient study.
    Ns2_2013,
}

impl Stack {
    /// Every profile, in the order `aqmlab` lists them.
    pub const ALL: [Stack; 6] =
        [Stack::Linux, Stack::L4steam2020, Stack::L4steam2020Apr, Stack::Sce2020, Stack::L4steam2024, Stack::Ns2_2013];

    /// The name used in scenarios and reports.
    pub fn name(self) -> &'static str {
        match self {
            Stack::Linux => "linux",
            Stack::L4steam2020 => "l4steam-2020",
            Stack::L4steam2020Apr => "l4steam-2020-04",
            Stack::Sce2020 => "sce-2020",
            Stack::L4steam2024 => "l4steam-2024",
            Stack::Ns2_2013 => "ns2-2013",
        }
    }

    /// One line saying which kernel the profile is.
    pub fn describe(self) -> &'static str {
        match self {
            Stack::Linux => "today's Linux (the engine's models as documented per algorithm)",
            Stack::L4steam2020 => "L4STeam/linux@b256daed, 4 Aug 2020 (heistp/l4s-tests flent runs)",
            Stack::L4steam2020Apr => "L4STeam/linux@e741f5ac, 8 Apr 2020 (heistp/sce-l4s-ect1, L4S side; re-run 1014c0e4)",
            Stack::Sce2020 => "chromi/sce@0eddf2ad, 9 Mar 2020 (heistp/sce-l4s-ect1, SCE side)",
            Stack::L4steam2024 => "L4STeam kernel of autumn 2024 (SCReAM over DualPi2 test record)",
            Stack::Ns2_2013 => "ns-2.35 with the 2012-2013 CoDel, sfqCoDel and PIE code (Järvinen & Kojo load transients)",
        }
    }

    /// The receiver's largest advertised window in bytes when a flow sets no `rwnd`: what
    /// receive-buffer autotuning reaches on the profile's kernel with its default sysctls.
    ///
    /// The testbeds (heistp/l4s-tests and heistp/sce-l4s-ect1, `fl` `ns_setup`) set only
    /// `net.ipv4.tcp_ecn` (and `tcp_sce`); flent's netperf passes no `-s`/`-S`, so the
    /// receiver's buffer is autotuned up to `tcp_rmem[2]`, which a new netns copies from the
    /// host (`tcp_sk_init`: `memcpy(net->ipv4.sysctl_tcp_rmem, init_net…)`, stored id
    /// 40302208090) and the host leaves at `tcp_init`'s `min(6 MiB, 1/128 of memory)`
    /// (stored id 36887411084): 6 MiB on any testbed host with more than 768 MiB. In 5.x,
    /// `tcp_rcv_space_adjust` (stored id 14065428767) sets `rcvbuf = min(rcvwin/advmss ×
    /// rcvmem, tcp_rmem[2])` and `window_clamp = tcp_win_from_space(rcvbuf)` =
    /// rcvbuf − rcvbuf >> `tcp_adv_win_scale` (1 by default, `tcp_sk_init`), so the window
    /// stops at 3 MiB. Below that ceiling autotuning grows the window by 3-6× per RTT
    /// (`grow` term), faster than slow start doubles, so only the ceiling is modelled. The
    /// host's own `tcp_rmem` was not published: the default is an assumption, stated so.
    ///
    /// `linux` keeps "not limiting": today's kernels replaced `tcp_adv_win_scale` by a
    /// measured `scaling_ratio` (6.6) and raised `tcp_rmem[2]` to 32 MiB (Eric Dumazet,
    /// net-next 2025, stored id 25373103302), a ceiling of about 16 MiB, above every
    /// suite's bandwidth-delay product.
    pub fn default_rwnd_bytes(self) -> Option<u64> {
        match self {
            // ns-2's receiver window belongs to the ns-2 TCP model (ns2-tcp branch).
            Stack::Linux | Stack::Ns2_2013 => None,
            Stack::L4steam2020 | Stack::L4steam2020Apr | Stack::Sce2020 | Stack::L4steam2024 => {
                const TCP_RMEM2: u64 = 6 * 1024 * 1024;
                const TCP_ADV_WIN_SCALE: u32 = 1;
                Some(TCP_RMEM2 - (TCP_RMEM2 >> TCP_ADV_WIN_SCALE))
            }
        }
    }

    /// The kernel's PRR (`tcp_cwnd_reduction`): the 5.4-based 2020 kernels run the 2015 form,
    /// 5.15 (`l4steam-2024`) the Oct-2020 form, today's Linux the May-2022 form
    /// (`crate::tcp::PrrVersion` cites the patches).
    pub fn prr_version(self) -> crate::tcp::PrrVersion {
        use crate::tcp::PrrVersion;
        match self {
            // ns2-2013: the Linux sender's code paths are not ns-2's; the ns-2 Sack1 model
            // (ns2-tcp branch) decides. Today's form until then.
            Stack::Linux | Stack::Ns2_2013 => PrrVersion::Crb,
            Stack::L4steam2020 | Stack::L4steam2020Apr | Stack::Sce2020 => PrrVersion::RetransAcked,
            Stack::L4steam2024 => PrrVersion::UnaAdvanced,
        }
    }

    /// The kernel's `tcp_cwnd_validate`: the 5.4-based 2020 trees predate both fixes (Dec
    /// 2020, 2022). `l4steam-2024` (5.15.72) has the Dec-2020 fix; whether its stable base
    /// already had the Oct-2022 backport of the 2022 fix is not established, so it keeps
    /// today's (`crate::tcp::CwndValidate`).
    pub fn cwnd_validate(self) -> crate::tcp::CwndValidate {
        use crate::tcp::CwndValidate;
        match self {
            Stack::L4steam2020 | Stack::L4steam2020Apr | Stack::Sce2020 => CwndValidate::SentOnly2015,
            Stack::Linux | Stack::L4steam2024 | Stack::Ns2_2013 => CwndValidate::Sticky,
        }
    }

    /// The 2020-2024 L4STeam kernels, which share the out-of-tree DualPI2 and Prague lineage.
    pub fn is_l4steam(self) -> bool {
        matches!(self, Stack::L4steam2020 | Stack::L4steam2020Apr | Stack::L4steam2024)
    }
}

impl fmt::Display for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Stack {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Stack::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            let known: Vec<&str> = Stack::ALL.iter().map(|p| p.name()).collect();
            format!("unknown stack '{s}', known: {}", known.join(", "))
        })
    }
}

impl<'de> Deserialize<'de> for Stack {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known() {
        for p in Stack::ALL {
            assert_eq!(p.name().parse::<Stack>(), Ok(p));
        }
        let e = "l4steam-2021".parse::<Stack>().unwrap_err();
        assert!(e.contains("unknown stack 'l4steam-2021'") && e.contains("l4steam-2020-04"), "{e}");
    }

    #[test]
    fn the_2020s_kernels_stop_the_receive_window_at_half_of_6_mib() {
        assert_eq!(Stack::Linux.default_rwnd_bytes(), None);
        for p in [Stack::L4steam2020, Stack::L4steam2020Apr, Stack::Sce2020, Stack::L4steam2024] {
            assert_eq!(p.default_rwnd_bytes(), Some(3_145_728), "{p}");
        }
    }

    #[test]
    fn each_kernel_gets_the_recovery_code_of_its_base() {
        use crate::tcp::{CwndValidate, PrrVersion, TcpConfig};
        for (p, prr, cv) in [
            (Stack::Linux, PrrVersion::Crb, CwndValidate::Sticky),
            (Stack::L4steam2020, PrrVersion::RetransAcked, CwndValidate::SentOnly2015),
            (Stack::L4steam2020Apr, PrrVersion::RetransAcked, CwndValidate::SentOnly2015),
            (Stack::Sce2020, PrrVersion::RetransAcked, CwndValidate::SentOnly2015),
            (Stack::L4steam2024, PrrVersion::UnaAdvanced, CwndValidate::Sticky),
        ] {
            let cfg = TcpConfig::default().on_host(true, p);
            assert_eq!((cfg.prr, cfg.cwnd_validate), (prr, cv), "{p}");
        }
    }
}
