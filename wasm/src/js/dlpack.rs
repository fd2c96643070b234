//! DLPack within the wasm heap: `toDLPack()` hands out the address of a managed tensor, and
//! `Tensor.fromDLPack(address)` takes one back.
//!
//! An address is a number JavaScript can forge, so `fromDLPack` dereferences nothing it was
//! merely given: every export is recorded here, by address, until it is taken back or its
//! deleter runs, and `fromDLPack` accepts only a recorded address, which it takes out of the
//! record (exactly once). To see a consumer's deleter call, the record swaps the export's
//! `deleter` for [`release_versioned`] / [`release_legacy`], which drop the record and then
//! run the original deleter; a take-back puts the original deleter back first.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ptr::NonNull;

use dlport_core::abi::{
    DLManagedTensor, DLManagedTensorDeleter, DLManagedTensorVersioned,
    DLManagedTensorVersionedDeleter, RawManaged,
};
use dlport_core::{ExportOptions, ImportOptions, ManagedTensor};
use wasm_bindgen::prelude::*;

use super::{Tensor, args, js_err, registry};

/// A live export: its pointer (with provenance) and the deleter it was made with.
#[derive(Clone, Copy)]
enum Export {
    Versioned(
        NonNull<DLManagedTensorVersioned>,
        Option<DLManagedTensorVersionedDeleter>,
    ),
    Legacy(NonNull<DLManagedTensor>, Option<DLManagedTensorDeleter>),
}

impl Export {
    fn form(self) -> &'static str {
        match self {
            Self::Versioned(..) => "a DLManagedTensorVersioned (toDLPack())",
            Self::Legacy(..) => "a legacy DLManagedTensor (toDLPack(true))",
        }
    }
}

thread_local! {
    /// Every export not yet taken back and whose deleter has not run, by address.
    static EXPORTS: RefCell<HashMap<usize, Export>> = RefCell::new(HashMap::new());
}

/// How many `toDLPack` exports are live: neither taken back by `fromDLPack` nor released by
/// their deleter.
pub fn live_exports() -> usize {
    EXPORTS.with(|e| e.borrow().len())
}

/// Records a fresh export and returns its address. The export's deleter is swapped for the
/// tracking one, so that a consumer's release drops the record too.
fn record(raw: RawManaged) -> usize {
    let (address, export) = match raw {
        RawManaged::Versioned(p) => {
            // SAFETY: `p` is the live export that `into_raw` just gave up; nobody else has seen
            // it, so writing its `deleter` races with nothing.
            let original = unsafe { (*p.as_ptr()).deleter.replace(release_versioned) };
            (
                p.as_ptr().expose_provenance(),
                Export::Versioned(p, original),
            )
        }
        RawManaged::Legacy(p) => {
            // SAFETY: as above.
            let original = unsafe { (*p.as_ptr()).deleter.replace(release_legacy) };
            (p.as_ptr().expose_provenance(), Export::Legacy(p, original))
        }
    };
    EXPORTS.with(|e| e.borrow_mut().insert(address, export));
    address
}

/// The deleter of a versioned export while it is recorded: forgets the record, then runs the
/// original deleter. An unrecorded pointer (a second call) is left alone: a leak, never a
/// second release.
///
/// # Safety
/// DLPack's contract: called at most once, by the export's owner, with the export's address.
unsafe extern "C" fn release_versioned(managed: *mut DLManagedTensorVersioned) {
    let export = EXPORTS.with(|e| e.borrow_mut().remove(&managed.addr()));
    if let Some(Export::Versioned(_, Some(original))) = export {
        // SAFETY: the record proves `managed` is a live export made with `original`, and the
        // record is gone, so this is its only release.
        unsafe { original(managed) };
    }
}

/// The deleter of a legacy export while it is recorded; as [`release_versioned`].
///
/// # Safety
/// As [`release_versioned`].
unsafe extern "C" fn release_legacy(managed: *mut DLManagedTensor) {
    let export = EXPORTS.with(|e| e.borrow_mut().remove(&managed.addr()));
    if let Some(Export::Legacy(_, Some(original))) = export {
        // SAFETY: as in `release_versioned`.
        unsafe { original(managed) };
    }
}

/// Takes the export at `address` out of the record, with its original deleter put back, or
/// says why there is none; the message names the value.
fn take(address: &JsValue, legacy: bool) -> Result<ManagedTensor, String> {
    let number = address.as_f64();
    let Some(a) = number.filter(|x| x.fract() == 0.0 && *x >= 1.0 && *x <= f64::from(u32::MAX))
    else {
        let what = match number {
            Some(_) => "is not an address (an integer from 1 to 2^32 - 1)",
            None => "is not a number",
        };
        return Err(format!(
            "address = {} {what}; pass what toDLPack() returned",
            args::show(address)
        ));
    };
    let a = a as usize;
    let export = EXPORTS.with(|e| {
        let mut exports = e.borrow_mut();
        let export = *exports.get(&a).ok_or_else(|| {
            format!(
                "address = {a} is not a live DLPack export of this module: it was never returned by toDLPack(), or was taken back already, or its deleter ran"
            )
        })?;
        if matches!(export, Export::Legacy(..)) != legacy {
            let wanted = if legacy {
                "a legacy DLManagedTensor (legacy = true)"
            } else {
                "a DLManagedTensorVersioned"
            };
            return Err(format!(
                "address = {a} is {}, not {wanted}; pass legacy = {}",
                export.form(),
                !legacy
            ));
        }
        exports.remove(&a);
        Ok(export)
    })?;
    // Put the original deleter back and hand the tensor to the importer, which validates it.
    let imported = match export {
        Export::Versioned(p, original) => {
            // SAFETY: the record held `p`, so it is a live export of this module that nobody
            // took back or released; taking the record made us its only owner.
            unsafe {
                (*p.as_ptr()).deleter = original;
                ManagedTensor::from_raw_versioned(p.as_ptr())
            }
        }
        Export::Legacy(p, original) => {
            // SAFETY: as above.
            unsafe {
                (*p.as_ptr()).deleter = original;
                ManagedTensor::from_raw_legacy(p.as_ptr())
            }
        }
    };
    imported.map_err(|e| e.to_string())
}

#[wasm_bindgen]
impl Tensor {
    /// Exports a DLPack 1.3 `DLManagedTensorVersioned` (or, with `legacy = true`, a legacy
    /// `DLManagedTensor`) in this wasm module's memory and returns its address, for another
    /// wasm module or JS glue to consume with its deleter, or for `Tensor.fromDLPack` to take
    /// back. The tensor's memory stays alive until one of the two happens.
    #[wasm_bindgen(js_name = toDLPack)]
    pub fn to_dlpack(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean | null")] legacy: JsValue,
    ) -> Result<u32, JsValue> {
        let mut options = ExportOptions::versioned();
        if args::flag("toDLPack", "legacy", &legacy)? {
            options.max_version = None;
        }
        let m = registry()?
            .to_dlpack(&self.inner, &options)
            .map_err(js_err)?;
        // wasm32: an address is 32 bits.
        Ok(record(m.into_raw()) as u32)
    }

    /// Takes back a DLPack tensor that `toDLPack` exported (`legacy = true` for a legacy one),
    /// without a copy. Only an address that `toDLPack` returned, and that was neither taken
    /// back nor released by its deleter, is accepted, once; anything else (0, another number,
    /// a non-integer, a second take-back, the wrong form) throws an `Error` naming the value.
    #[wasm_bindgen(js_name = fromDLPack)]
    pub fn from_dlpack(
        #[wasm_bindgen(unchecked_param_type = "number")] address: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean | null")] legacy: JsValue,
    ) -> Result<Tensor, JsValue> {
        let legacy = args::flag("fromDLPack", "legacy", &legacy)?;
        let m = take(&address, legacy)
            .map_err(|message| JsError::new(&format!("dlport: fromDLPack: {message}")))?;
        let inner = registry()?
            .from_dlpack(m, &ImportOptions::default())
            .map_err(js_err)?;
        Ok(Tensor { inner })
    }
}
