//! Names of data types and devices: Display, FromStr back, byte sizes, and the serde form of
//! `TensorInfo`.

use dlport_core::abi::{DeviceType, TypeCode};
use dlport_core::dtype::{Element, Fp4Convention};
use dlport_core::{DataType, Device, ExportBuilder};

#[test]
fn every_standard_dtype_has_a_name_that_parses_back() {
    let names = [
        (DataType::INT8, "int8"),
        (DataType::INT16, "int16"),
        (DataType::INT32, "int32"),
        (DataType::INT64, "int64"),
        (DataType::UINT8, "uint8"),
        (DataType::UINT16, "uint16"),
        (DataType::UINT32, "uint32"),
        (DataType::UINT64, "uint64"),
        (DataType::FLOAT16, "float16"),
        (DataType::FLOAT32, "float32"),
        (DataType::FLOAT64, "float64"),
        (DataType::BFLOAT16, "bfloat16"),
        (DataType::COMPLEX64, "complex64"),
        (DataType::COMPLEX128, "complex128"),
        (DataType::BOOL, "bool"),
        (DataType::FLOAT8_E3M4, "float8_e3m4"),
        (DataType::FLOAT8_E4M3, "float8_e4m3"),
        (DataType::FLOAT8_E4M3B11FNUZ, "float8_e4m3b11fnuz"),
        (DataType::FLOAT8_E4M3FN, "float8_e4m3fn"),
        (DataType::FLOAT8_E4M3FNUZ, "float8_e4m3fnuz"),
        (DataType::FLOAT8_E5M2, "float8_e5m2"),
        (DataType::FLOAT8_E5M2FNUZ, "float8_e5m2fnuz"),
        (DataType::FLOAT8_E8M0FNU, "float8_e8m0fnu"),
        (DataType::FLOAT6_E2M3FN, "float6_e2m3fn"),
        (DataType::FLOAT6_E3M2FN, "float6_e3m2fn"),
        (DataType::FLOAT4_E2M1FN, "float4_e2m1fn"),
        (DataType::FLOAT4_E2M1FN_X2, "float4_e2m1fn_x2"),
        (DataType::BCOMPLEX32, "bcomplex32"),
        (DataType::new(TypeCode::FLOAT, 32, 4), "float32x4"),
        (DataType::new(TypeCode::INT, 4, 1), "int4"),
        (DataType::new(TypeCode::OPAQUE_HANDLE, 64, 1), "handle64"),
    ];
    for (dt, name) in names {
        assert_eq!(dt.to_string(), name);
        assert_eq!(name.parse::<DataType>().unwrap(), dt, "{name}");
        dt.validate().unwrap();
    }
    // Every type code has at least one valid name.
    for &code in TypeCode::ALL_KNOWN {
        assert!(
            names.iter().any(|(d, _)| d.code == code),
            "{code} has no named dtype"
        );
    }
    // Aliases and invalid names.
    assert_eq!("half".parse::<DataType>().unwrap(), DataType::FLOAT16);
    assert_eq!("double".parse::<DataType>().unwrap(), DataType::FLOAT64);
    for bad in [
        "",
        "float",
        "float33x",
        "int-8",
        "float8_e4m3fn_x",
        "float4_e2m1fn_x3",
        "bool16",
        "complex24",
    ] {
        if bad == "float" {
            continue; // an alias of float32
        }
        let err = bad.parse::<DataType>().unwrap_err();
        assert!(err.to_string().contains(&format!("\"{bad}\"")), "{err}");
    }
    // Unknown types display generically and parse back.
    let odd = DataType::new(TypeCode(99), 8, 1);
    assert_eq!(odd.to_string(), "dtype(code=99, bits=8, lanes=1)");
    assert_eq!(odd.to_string().parse::<DataType>().unwrap(), odd);
}

#[test]
fn byte_sizes_include_sub_byte_packing() {
    assert_eq!(DataType::FLOAT32.size_bytes(), 4);
    assert_eq!(DataType::COMPLEX128.size_bytes(), 16);
    assert_eq!(DataType::new(TypeCode::FLOAT, 32, 4).size_bytes(), 16);
    assert_eq!(DataType::FLOAT4_E2M1FN.bytes_for(5, false), Some(3));
    assert_eq!(DataType::FLOAT4_E2M1FN.bytes_for(5, true), Some(5));
    assert_eq!(DataType::FLOAT4_E2M1FN_X2.bytes_for(5, false), Some(5));
    assert_eq!(DataType::FLOAT6_E3M2FN.bytes_for(4, false), Some(3));
    assert_eq!(
        DataType::new(TypeCode::INT, 1, 1).bytes_for(9, false),
        Some(2)
    );
    assert_eq!(DataType::FLOAT64.bytes_for(u64::MAX, false), None);
}

#[test]
fn elements_map_to_their_dtypes() {
    fn dt<T: Element>() -> DataType {
        T::DTYPE
    }
    assert_eq!(dt::<f32>(), DataType::FLOAT32);
    assert_eq!(dt::<half::bf16>(), DataType::BFLOAT16);
    assert_eq!(dt::<half::f16>(), DataType::FLOAT16);
    assert_eq!(dt::<dlport_core::dtype::Complex32>(), DataType::COMPLEX64);
    assert_eq!(dt::<dlport_core::dtype::Bool8>(), DataType::BOOL);
    assert_eq!(dt::<u64>(), DataType::UINT64);
}

#[test]
fn fp4_conventions_convert_on_export() {
    // 8 fp4 values packed in 4 bytes.
    let bytes = vec![0x21u8, 0x43, 0x65, 0x87];
    let jax = ExportBuilder::new(bytes.clone(), DataType::FLOAT4_E2M1FN, &[2, 4])
        .build()
        .unwrap();
    assert_eq!(jax.view().byte_span().hi, 4);
    let torch = ExportBuilder::new(bytes.clone(), DataType::FLOAT4_E2M1FN, &[2, 4])
        .fp4_convention(Fp4Convention::X2)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(torch.view().dtype(), DataType::FLOAT4_E2M1FN_X2);
    assert_eq!(torch.view().shape(), &[2, 2]);
    assert_eq!(torch.view().as_bytes().unwrap(), &bytes[..]);
    let back = ExportBuilder::new(bytes.clone(), DataType::FLOAT4_E2M1FN_X2, &[2, 2])
        .fp4_convention(Fp4Convention::Packed)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(back.view().shape(), &[2, 4]);
    assert!(
        ExportBuilder::new(bytes.clone(), DataType::FLOAT4_E2M1FN, &[3])
            .fp4_convention(Fp4Convention::X2)
            .is_err()
    );
    assert!(
        ExportBuilder::new(bytes, DataType::UINT8, &[4])
            .fp4_convention(Fp4Convention::X2)
            .is_err()
    );
}

#[test]
fn devices_display_and_parse() {
    let cases = [
        (Device::cpu(), "cpu"),
        (Device::cuda(0), "cuda:0"),
        (Device::cuda(3), "cuda:3"),
        (Device::cuda_host(), "cuda_host:0"),
        (Device::webgpu(0), "webgpu:0"),
        (Device::new(DeviceType::ONEAPI, 1), "oneapi:1"),
        (Device::new(DeviceType(99), 0), "device_type(99):0"),
        (Device::new(DeviceType::CPU, 2), "cpu:2"),
    ];
    for (d, s) in cases {
        assert_eq!(d.to_string(), s);
        assert_eq!(s.parse::<Device>().unwrap(), d, "{s}");
    }
    for bad in ["gpu:0", "cuda:x", "device_type(z):0"] {
        assert!(bad.parse::<Device>().is_err(), "{bad}");
    }
    assert_eq!(DeviceType::ONEAPI.to_string(), "kDLOneAPI (14)");
    assert_eq!(DeviceType(5).to_string(), "device_type(5)");
    for n in 1..=21 {
        assert_eq!(DeviceType(n).is_known(), !matches!(n, 5 | 6), "{n}");
    }
}

#[cfg(feature = "serde")]
#[test]
fn tensor_info_serializes_to_json_and_back() {
    use dlport_core::abi::FLAG_READ_ONLY;
    use dlport_core::layout::TensorInfo;
    let t = ExportBuilder::from_vec(vec![0f32; 12], &[3, 4])
        .strides(&[1, 3])
        .read_only(true)
        .build()
        .unwrap();
    let info = TensorInfo::from(&t.view());
    let json = serde_json::to_string(&info).unwrap();
    assert_eq!(
        json,
        r#"{"shape":[3,4],"strides":[1,3],"dtype":"float32","device":"cpu","byte_offset":0,"flags":1,"version":{"major":1,"minor":3},"numel":12,"contiguity":"column_major","byte_span":[0,48]}"#
    );
    assert_eq!(info.flags, FLAG_READ_ONLY);
    let back: TensorInfo = serde_json::from_str(&json).unwrap();
    assert_eq!(back, info);
    let bad = json.replace("float32", "float99x");
    assert!(
        serde_json::from_str::<TensorInfo>(&bad)
            .unwrap_err()
            .to_string()
            .contains("float99x")
    );
}
