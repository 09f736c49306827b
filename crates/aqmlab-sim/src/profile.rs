//! Era profiles: which kernel's (or fork's) parameter defaults a scenario models.
//!
//! A qdisc or congestion-control parameter declares a base default (today's Linux) and may
//! override it per [`Stack`] (`crate::params::Param::defaults`). A parameter given
//! explicitly in the scenario always wins over a profile default.

use std::fmt;
use std::str::FromStr;

/// A network stack whose defaults a scenario can select.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Stack {
    /// Mainline Linux as modelled by each algorithm page (the default).
    #[default]
    Linux,
    /// The L4S team's kernel used by the 2020 L4S tests: L4STeam/linux@b256daed (4 Aug 2020).
    L4steam2020,
    /// The L4S team's kernel of April 2020: L4STeam/linux@e741f5ac (8 Apr 2020).
    L4steam2020Apr,
    /// The SCE kernel: chromi/sce@0eddf2ad (9 Mar 2020).
    Sce2020,
    /// The L4S team's kernel of autumn 2024.
    L4steam2024,
}

impl Stack {
    /// Every stack, the default first.
    pub const ALL: [Stack; 5] = [Stack::Linux, Stack::L4steam2020, Stack::L4steam2020Apr, Stack::Sce2020, Stack::L4steam2024];

    /// The name scenarios use (`stack = "l4steam-2020"`).
    pub const fn name(self) -> &'static str {
        match self {
            Stack::Linux => "linux",
            Stack::L4steam2020 => "l4steam-2020",
            Stack::L4steam2020Apr => "l4steam-2020-04",
            Stack::Sce2020 => "sce-2020",
            Stack::L4steam2024 => "l4steam-2024",
        }
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
        Stack::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            let known: Vec<&str> = Stack::ALL.iter().map(|k| k.name()).collect();
            format!("unknown stack '{s}' (known: {})", known.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_linux_is_the_default() {
        for s in Stack::ALL {
            assert_eq!(s.to_string().parse::<Stack>(), Ok(s));
        }
        assert_eq!(Stack::default(), Stack::Linux);
        assert_eq!("l4steam-2020-04".parse::<Stack>(), Ok(Stack::L4steam2020Apr));
        let e = "l4steam".parse::<Stack>().unwrap_err();
        assert!(e.contains("'l4steam'") && e.contains("sce-2020"), "{e}");
    }
}
