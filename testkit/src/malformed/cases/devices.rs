//! `device`: the rule of device ids (`dlport_core::device`), for every device of
//! `device_ids.txt`, on a capsule a producer sends.

use dlport_core::Error;
use dlport_core::backend::DeviceField;
use dlport_core::error::DispatchError;
use dlport_core::layout::Contiguity::*;

use crate::malformed::{Case, Expect, case, device_ids, ok};

pub(crate) fn cases() -> Vec<(Case, Expect)> {
    device_ids()
        .into_iter()
        // The table's default case is already a 0-d tensor on `cpu`.
        .filter(|&(device, _)| device != dlport_core::Device::cpu())
        .map(|(device, accepted)| {
            let rule = if accepted {
                "a device id the rule of device ids accepts (device_ids.txt)"
            } else {
                "a device id the rule of device ids refuses (device_ids.txt): a negative id, a \
                 kDLCPU id other than 0"
            };
            let c = case(rule).device(device);
            let expect = if accepted {
                ok(1, Both, (0, 4), &[])
            } else {
                Expect::Err(Error::Dispatch(DispatchError::InvalidDevice {
                    field: DeviceField::Tensor,
                    device,
                }))
            };
            (c, expect)
        })
        .collect()
}
