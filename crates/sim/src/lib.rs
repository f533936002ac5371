//! Deterministic generators with ground truth, and the A/B impairer.
//!
//! Everything here is a pure function of its seed: the same seed gives the same bytes on
//! every machine (xoshiro256++ from `rand_xoshiro`, never an OS source of randomness).
#![forbid(unsafe_code)]

pub mod fix_md;
pub mod glimpse;
pub mod impair;
pub mod itch;
pub mod matching;
pub mod moldudp64;
pub mod nyse;
pub mod opra_binary;
pub mod opra_fast;
pub mod rerequest;

pub use fix_md::{fix_symbol, FixMd, FixMdConfig};
pub use impair::{impair, ImpairConfig, Impaired, Streaming, TruthRow};
pub use itch::{generate_itch, ItchDay, ItchGenConfig, TruthBook};
pub use matching::{generate_matching, match_event, GenValue, MatchGenConfig, MatchWorkload, Workload};
pub use moldudp64::{generate_moldudp64, MoldGenConfig};
pub use nyse::{translate_itch_day, NyseDay};
pub use opra_binary::{generate_opra_binary, OpraBinaryTruth, TruthBbo};
pub use opra_fast::{generate_opra_fast, OpraFastTruth, OpraGenConfig, TruthEvent};
pub use rerequest::{RerequestServer, ServerFaults, ServerStats};
