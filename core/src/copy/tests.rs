use super::*;

#[test]
fn plans_merge_contiguous_axes_and_drop_unit_axes() {
    let p = Plan::new(&[2, 1, 3, 4], [12, 99, 4, 1].into_iter(), 4);
    assert_eq!(
        p.axes(),
        &[Axis {
            extent: 24,
            stride: 4
        }]
    );
    let p = Plan::new(&[3, 4], [1, 3].into_iter(), 2);
    assert_eq!(
        p.axes(),
        &[
            Axis {
                extent: 3,
                stride: 2
            },
            Axis {
                extent: 4,
                stride: 6
            }
        ]
    );
    let p = Plan::new(&[5, 2], [-2, 1].into_iter(), 8);
    assert_eq!(
        p.axes(),
        &[
            Axis {
                extent: 5,
                stride: -16
            },
            Axis {
                extent: 2,
                stride: 8
            }
        ]
    );
}
