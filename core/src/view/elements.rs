//! Reading a view's elements: as a typed slice or raw bytes where the layout allows, one
//! element at a multi-index for any layout, and a row-major copy of all of them.

use super::TensorRef;
use crate::dtype::Element;
use crate::error::{AccessError, Error};

impl<'a> TensorRef<'a> {
    /// The host can read the memory through a pointer.
    fn check_host(&self) -> Result<(), Error> {
        if !self.device.is_host_accessible() {
            return Err(Error::Access(AccessError::NotHostAccessible {
                device: self.device,
            }));
        }
        Ok(())
    }

    /// The host can read the memory, and its elements are `T`s: what any element read needs.
    fn check_elements<T: Element>(&self) -> Result<(), Error> {
        self.check_host()?;
        if self.dtype != T::DTYPE {
            return Err(Error::Access(AccessError::DtypeMismatch {
                requested: T::DTYPE,
                actual: self.dtype,
            }));
        }
        Ok(())
    }

    /// Checks everything a typed slice needs: [`check_elements`](Self::check_elements), a
    /// row-major layout and an aligned first element.
    fn check_typed<T: Element>(&self) -> Result<(), Error> {
        self.check_elements::<T>()?;
        if !self.layout.contiguity.is_row_major() {
            return Err(Error::Access(AccessError::NotContiguous {
                contiguity: self.layout.contiguity,
            }));
        }
        let address = self.first_element_address().unwrap_or(0);
        if self.layout.numel != 0 && address % core::mem::align_of::<T>() != 0 {
            return Err(Error::Access(AccessError::Misaligned {
                address,
                required: core::mem::align_of::<T>(),
            }));
        }
        Ok(())
    }

    /// The elements as a slice, in row-major order.
    ///
    /// Errors: [`AccessError::NotHostAccessible`], [`AccessError::DtypeMismatch`],
    /// [`AccessError::NotContiguous`], [`AccessError::Misaligned`].
    pub fn as_slice<T: Element>(&self) -> Result<&'a [T], Error> {
        self.check_typed::<T>()?;
        if self.layout.numel == 0 {
            return Ok(&[]);
        }
        // SAFETY: the memory is host-accessible; validation proved address + [0, numel *
        // size_of::<T>()) is the span (row-major, dtype = T, so the span is exactly that),
        // inside the address space and non-NULL; the alignment was checked; the constructor's
        // caller guarantees the bytes are readable and unmutated for 'a; T is Pod, so any bit
        // pattern is a valid T.
        Ok(unsafe {
            core::slice::from_raw_parts(
                self.first_element_ptr().cast::<T>(),
                self.layout.numel as usize,
            )
        })
    }

    /// The raw bytes of a row-major contiguous host tensor (any dtype, sub-byte packed ones
    /// included).
    pub fn as_bytes(&self) -> Result<&'a [u8], Error> {
        self.check_host()?;
        if !self.layout.contiguity.is_row_major() {
            return Err(Error::Access(AccessError::NotContiguous {
                contiguity: self.layout.contiguity,
            }));
        }
        if self.layout.numel == 0 {
            return Ok(&[]);
        }
        // SAFETY: host-accessible, row-major, so the span is [0, hi) from the first element, which
        // validation kept inside the address space; readable for 'a by the constructor's
        // contract; u8 has no alignment or validity requirement.
        Ok(unsafe {
            core::slice::from_raw_parts(self.first_element_ptr(), self.layout.span.hi as usize)
        })
    }

    /// Reads the element at a multi-index, for any layout (strided, negative, broadcast).
    ///
    /// Returns `Ok(None)` if `index` has the wrong length or is out of bounds.
    pub fn get<T: Element>(&self, index: &[usize]) -> Result<Option<T>, Error> {
        self.check_elements::<T>()?;
        if index.len() != self.shape.len() {
            return Ok(None);
        }
        let mut offset: i64 = 0;
        for (axis, (&i, &extent)) in index.iter().zip(self.shape).enumerate() {
            if i as u64 >= extent as u64 {
                return Ok(None);
            }
            // Within the validated span, so no overflow: |i * stride| ≤ |(extent-1) * stride|.
            offset += i as i64 * self.stride(axis).unwrap_or(0);
        }
        let address = self
            .first_element_ptr()
            .wrapping_offset((offset * core::mem::size_of::<T>() as i64) as isize);
        // SAFETY: the index is in bounds, so the element lies inside the validated span, which
        // is readable for 'a (constructor contract); read_unaligned has no alignment demand and
        // T is Pod, so any bytes make a valid T.
        Ok(Some(unsafe {
            core::ptr::read_unaligned(address.cast::<T>())
        }))
    }

    /// Copies the elements out in row-major order, whatever the layout. The size is checked
    /// against the process-wide [allocation limit](crate::set_alloc_limit) and allocated
    /// fallibly.
    #[cfg(feature = "alloc")]
    pub fn to_vec<T: Element>(&self) -> Result<alloc::vec::Vec<T>, Error> {
        let bytes = u128::from(self.layout.numel) * core::mem::size_of::<T>() as u128;
        crate::limit::check_alloc(bytes, None)?;
        if let Ok(slice) = self.as_slice::<T>() {
            let mut out = alloc::vec::Vec::new();
            out.try_reserve_exact(slice.len()).map_err(|_| {
                Error::Backend(crate::error::BackendError::AllocationFailed {
                    bytes: bytes as u64,
                    align: core::mem::align_of::<T>(),
                })
            })?;
            out.extend_from_slice(slice);
            return Ok(out);
        }
        self.check_elements::<T>()?;
        // A broadcast (zero-stride) tensor can have far more elements than bytes behind it:
        // refuse what cannot be allocated instead of aborting.
        let fail = Error::Backend(crate::error::BackendError::AllocationFailed {
            bytes: self
                .layout
                .numel
                .saturating_mul(core::mem::size_of::<T>() as u64),
            align: core::mem::align_of::<T>(),
        });
        let count = usize::try_from(self.layout.numel).map_err(|_| fail.clone())?;
        // Zeroed by the allocator (fresh zero pages for a large vector), not by a second pass.
        let mut out = bytemuck::allocation::try_zeroed_vec::<T>(count).map_err(|()| fail)?;
        // Strided, broadcast or misaligned: the copy kernels gather in row-major order. `T` is
        // the dtype's element (checked above), a whole number of bytes, so the vector's bytes
        // are exactly the compact size.
        self.copy_to_compact(bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }
}
