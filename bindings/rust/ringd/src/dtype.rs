//! Element types: the [`Element`] trait maps Rust's numeric types (and the
//! [`F16`] / [`BF16`] newtypes) onto libring's dtypes, so that the collectives
//! are generic over slices of them.
use ringd_sys as sys;

/// libring's dtypes (`enum ring_dtype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    Bool,
    Int8,
    UInt8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    Float16,
    BFloat16,
    Float32,
    Float64,
}

impl Dtype {
    /// Every dtype, in ring.h's order.
    pub const ALL: [Dtype; 13] = [
        Dtype::Bool,
        Dtype::Int8,
        Dtype::UInt8,
        Dtype::Int16,
        Dtype::UInt16,
        Dtype::Int32,
        Dtype::UInt32,
        Dtype::Int64,
        Dtype::UInt64,
        Dtype::Float16,
        Dtype::BFloat16,
        Dtype::Float32,
        Dtype::Float64,
    ];

    /// The `enum ring_dtype` value.
    pub fn raw(self) -> sys::ring_dtype {
        match self {
            Dtype::Bool => sys::RING_BOOL,
            Dtype::Int8 => sys::RING_INT8,
            Dtype::UInt8 => sys::RING_UINT8,
            Dtype::Int16 => sys::RING_INT16,
            Dtype::UInt16 => sys::RING_UINT16,
            Dtype::Int32 => sys::RING_INT32,
            Dtype::UInt32 => sys::RING_UINT32,
            Dtype::Int64 => sys::RING_INT64,
            Dtype::UInt64 => sys::RING_UINT64,
            Dtype::Float16 => sys::RING_FLOAT16,
            Dtype::BFloat16 => sys::RING_BFLOAT16,
            Dtype::Float32 => sys::RING_FLOAT32,
            Dtype::Float64 => sys::RING_FLOAT64,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::Bool | Dtype::Int8 | Dtype::UInt8 => 1,
            Dtype::Int16 | Dtype::UInt16 | Dtype::Float16 | Dtype::BFloat16 => 2,
            Dtype::Int32 | Dtype::UInt32 | Dtype::Float32 => 4,
            Dtype::Int64 | Dtype::UInt64 | Dtype::Float64 => 8,
        }
    }

    /// Whether RING_AVG applies (floating types only).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            Dtype::Float16 | Dtype::BFloat16 | Dtype::Float32 | Dtype::Float64
        )
    }

    /// libring's name ("float32", "bfloat16", ...).
    pub fn name(self) -> String {
        // SAFETY: ring_dtype_name returns a static string for any value.
        unsafe { crate::error::c_text(sys::ring_dtype_name(self.raw())) }
    }
}

/// Reductions (`enum ring_op`).  `Avg` is for floating types; for bool, `Sum`
/// and `Max` are OR, `Prod` and `Min` are AND.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    Avg,
}

impl ReduceOp {
    /// The `enum ring_op` value.
    pub fn raw(self) -> sys::ring_op {
        match self {
            ReduceOp::Sum => sys::RING_SUM,
            ReduceOp::Prod => sys::RING_PROD,
            ReduceOp::Max => sys::RING_MAX,
            ReduceOp::Min => sys::RING_MIN,
            ReduceOp::Avg => sys::RING_AVG,
        }
    }
}

/// How the float32 data of a sum or average travels between daemons
/// (ring.h, "Compression on the wire"): as itself, or as bfloat16 / float16,
/// accumulated in float32 at every hop; every rank gets the same bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wire {
    F32,
    Bf16,
    Fp16,
}

impl Wire {
    /// The name `ring_options.wire` and RING_WIRE take.
    pub fn name(self) -> &'static str {
        match self {
            Wire::F32 => "f32",
            Wire::Bf16 => "bf16",
            Wire::Fp16 => "fp16",
        }
    }

    /// The `RING_WIRE_*` bits OR-ed into an operation's op.
    pub fn bits(self) -> sys::ring_op {
        match self {
            Wire::F32 => sys::RING_WIRE_F32,
            Wire::Bf16 => sys::RING_WIRE_BF16,
            Wire::Fp16 => sys::RING_WIRE_FP16,
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A type whose slices libring moves and reduces as the dtype `DTYPE`.
///
/// # Safety
/// Sealed: implemented here only, for types whose layout is the dtype's
/// (size, alignment, and every bit pattern libring can write is a valid value,
/// or `ANY_BITS` is false and the crate normalises what libring wrote).
pub unsafe trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The dtype libring sees.
    const DTYPE: Dtype;
    /// False for bool: bytes that arrive from a peer (a C program may send a
    /// bool of 2) are turned into 0/1 before Rust reads them as `bool`.
    #[doc(hidden)]
    const ANY_BITS: bool = true;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(
            impl sealed::Sealed for $t {}
            // SAFETY: $t has the size and alignment of the dtype and every
            // bit pattern is a valid $t.
            unsafe impl Element for $t {
                const DTYPE: Dtype = Dtype::$d;
            }
        )*
    };
}

element! {
    i8 => Int8, u8 => UInt8, i16 => Int16, u16 => UInt16, i32 => Int32,
    u32 => UInt32, i64 => Int64, u64 => UInt64, f32 => Float32, f64 => Float64,
    F16 => Float16, BF16 => BFloat16,
}

impl sealed::Sealed for bool {}
// SAFETY: bool is one byte; libring's bool reductions write 0 or 1, and every
// other write into a bool slice is normalised (ANY_BITS = false).
unsafe impl Element for bool {
    const DTYPE: Dtype = Dtype::Bool;
    const ANY_BITS: bool = false;
}

/// Makes the `len` bytes at `p` valid values of T after libring wrote them.
///
/// # Safety
/// `p` points to `len` writable elements of T that nothing else accesses.
pub(crate) unsafe fn settle<T: Element>(p: *mut T, len: usize) {
    if !T::ANY_BITS {
        let bytes = p as *mut u8;
        for i in 0..len * std::mem::size_of::<T>() {
            let b = bytes.add(i);
            *b = (*b != 0) as u8;
        }
    }
}

/// IEEE 754 binary16, as its bits.  Conversions round to nearest even.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct F16(pub u16);

/// bfloat16 (the upper half of a float32), as its bits.  Conversions round to
/// nearest even.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BF16(pub u16);

impl F16 {
    /// The nearest binary16 (overflow gives infinity, NaN stays NaN).
    pub fn from_f32(x: f32) -> F16 {
        F16(f32_to_f16(x))
    }

    /// The exact float32 value.
    pub fn to_f32(self) -> f32 {
        f16_to_f32(self.0)
    }
}

impl BF16 {
    /// The nearest bfloat16 (NaN stays NaN).
    pub fn from_f32(x: f32) -> BF16 {
        let b = x.to_bits();
        if x.is_nan() {
            return BF16((b >> 16) as u16 | 0x40);
        }
        let round = 0x7fff + ((b >> 16) & 1);
        BF16((b.wrapping_add(round) >> 16) as u16)
    }

    /// The exact float32 value.
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

impl From<f32> for F16 {
    fn from(x: f32) -> F16 {
        F16::from_f32(x)
    }
}

impl From<F16> for f32 {
    fn from(x: F16) -> f32 {
        x.to_f32()
    }
}

impl From<f32> for BF16 {
    fn from(x: f32) -> BF16 {
        BF16::from_f32(x)
    }
}

impl From<BF16> for f32 {
    fn from(x: BF16) -> f32 {
        x.to_f32()
    }
}

/// Drops the low `shift` bits of m, rounding to nearest even.
fn round_shift(m: u32, shift: u32) -> u32 {
    let kept = m >> shift;
    let rem = m & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    if rem > half || (rem == half && kept & 1 == 1) {
        kept + 1
    } else {
        kept
    }
}

fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        let nan = if man != 0 {
            0x200 | (man >> 13) as u16
        } else {
            0
        };
        return sign | 0x7c00 | nan;
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // A subnormal half: k units of 2^-24, k = 1.man x 2^(e - 14 + 23).
        let shift = (14 - e) as u32;
        if shift > 24 {
            return sign;
        }
        return sign | round_shift(man | 0x80_0000, shift) as u16;
    }
    // A carry out of the mantissa rounds up into the exponent (up to infinity).
    sign | round_shift(((e as u32) << 23) | man, 13) as u16
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match exp {
        0 => {
            let v = man as f32 * (1.0 / 16_777_216.0); // man x 2^-24, exact
            return if sign != 0 { -v } else { v };
        }
        0x1f => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversions_round_to_nearest_even() {
        assert_eq!(F16::from_f32(1.0).0, 0x3c00);
        assert_eq!(F16::from_f32(-2.5).0, 0xc100);
        assert_eq!(F16::from_f32(65504.0).0, 0x7bff);
        assert_eq!(F16::from_f32(65520.0).0, 0x7c00); // ties to even: infinity
        assert_eq!(F16::from_f32(5.960_464_5e-8).0, 0x0001); // 2^-24
        assert_eq!(F16::from_f32(2.98e-8).0, 0x0000); // below half of 2^-24
        assert_eq!(F16::from_f32(1.0 + 1.0 / 2048.0).0, 0x3c00); // tie, even stays
        assert_eq!(F16::from_f32(1.0 + 3.0 / 2048.0).0, 0x3c02); // tie, rounds up
        assert!(F16::from_f32(f32::NAN).to_f32().is_nan());
        for h in 0..=0xffffu16 {
            let f = F16(h).to_f32();
            if !f.is_nan() {
                assert_eq!(F16::from_f32(f).0, h, "binary16 {:#06x} round trip", h);
            }
        }
        assert_eq!(BF16::from_f32(1.0).0, 0x3f80);
        assert_eq!(BF16::from_f32(1.0 + 1.0 / 256.0).0, 0x3f80);
        assert_eq!(BF16::from_f32(1.0 + 3.0 / 256.0).0, 0x3f82);
        assert_eq!(BF16(0x4049).to_f32(), f32::from_bits(0x4049_0000));
    }

    #[test]
    fn dtypes_agree_with_libring() {
        for d in Dtype::ALL {
            // SAFETY: ring_dtype_size takes any value.
            assert_eq!(
                unsafe { sys::ring_dtype_size(d.raw()) },
                d.size(),
                "{:?}",
                d
            );
        }
        assert_eq!(Dtype::BFloat16.name(), "bfloat16");
    }
}
