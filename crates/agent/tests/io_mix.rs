//! The userspace backend's sequential/random mix on real IO (root and BTF): a sequential and a random
//! fio reader in two blkio cgroups on a loop device; the mix the agent takes from the eBPF observer
//! charges the sequential one at the model's sequential price and the random one (nearly) at the
//! random price.

mod common;

use std::time::Duration;

use common::{wait_for, Rig};
use ioshare_agent::backend::userspace::io_mix::IoMix;
use ioshare_core::iocost::aggregate::aggregate_cost;
use ioshare_core::{LinearModel, ModelParams, Op};

#[test]
fn a_sequential_reader_is_charged_at_sequential_prices() {
    if ioshare_observe::skip_unless_traceable("a_sequential_reader_is_charged_at_sequential_prices") {
        return;
    }
    let rig = Rig::new("io-mix", &["seq", "rand"]);
    let mut mix = IoMix::start(rig.devnum());
    assert!(mix.observing());
    mix.refresh();
    let before = (rig.ios(0), rig.ios(1));
    // QD1 sequential 4 KiB reads: each starts where the previous ended (fio wraps at the end of the
    // 512 MiB device, far beyond what it reads here). Random reads over 512 MiB land within 16 MiB of
    // the previous one about 2 × 16 / 512 = 6% of the time.
    let _seq = rig.fio(0, 1, &["--rw=read"]);
    let _rand = rig.fio(1, 4, &[]);
    let enough = wait_for(Duration::from_secs(20), || rig.ios(0) >= before.0 + 1000 && rig.ios(1) >= before.1 + 1000);
    assert!(enough.is_some(), "the readers did not complete 1000 IOs each within 20 s");
    mix.refresh();

    let model = LinearModel::new(ModelParams::SSD_DFL);
    let (seq_share, rand_share) =
        (mix.sequential_share(&rig.rel(0), Op::Read), mix.sequential_share(&rig.rel(1), Op::Read));
    // Every IO of the sequential reader starts where its previous one ended (its first has no
    // predecessor and is not counted): exactly 1.
    assert_eq!(seq_share, 1.0, "sequential reader");
    // 6% expected; 20% leaves room for chance on a few thousand IOs.
    assert!(rand_share < 0.2, "random reader counted {rand_share} sequential");
    // The parent's share covers both children: between theirs.
    let parent = mix.sequential_share(&rig.parent(), Op::Read);
    assert!(parent > rand_share && parent < seq_share, "parent {parent}");

    let (ios, bytes) = (1000, 1000 * 4096);
    let sequential_price = aggregate_cost(&model, Op::Read, ios, bytes, false);
    let random_price = aggregate_cost(&model, Op::Read, ios, bytes, true);
    assert_eq!(mix.charge(&model, &rig.rel(0), Op::Read, ios, bytes), sequential_price);
    let rand_charge = mix.charge(&model, &rig.rel(1), Op::Read, ios, bytes);
    // Some (6% expected, under 20% asserted) but not all of its IOs counted sequential: the charge lies
    // strictly between the two prices, so a charge that ignored the observed share (all random or
    // all sequential) fails.
    assert!(rand_share > 0.0, "a random reader over 512 MiB lands near its previous offset now and then");
    assert!(sequential_price < rand_charge && rand_charge < random_price, "{rand_charge}");
    eprintln!(
        "io mix: sequential reader {:.0}% sequential, random reader {:.0}%; 1000 x 4 KiB reads charged {sequential_price} vs {rand_charge} (all random: {random_price})",
        seq_share * 100.0,
        rand_share * 100.0
    );
}
