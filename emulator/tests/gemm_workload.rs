//! Workloads: Table 7.3 expansion, the dataset, CSV GEMM lists.

use nmcp_emulator::gpu::workload::{
    dataset_gemms, evaluated_gemms, parse_gemm_csv, DATASET_SEED, DATASET_SIZE, NETWORKS,
};
use nmcp_isa::gemm_ext::GemmDataType;

#[test]
fn every_network_contributes_and_the_dataset_has_1072_unique_gemms() {
    let eval = evaluated_gemms();
    for net in NETWORKS {
        assert!(
            eval.iter().any(|g| g.app == net.name),
            "{} missing",
            net.name
        );
    }
    // BERT-Large FC-1 forward at 4096 tokens is there, with its backward GEMMs.
    let has = |m, n, k, ta, tb| {
        eval.iter().any(|g| {
            g.app == "bert"
                && (
                    g.shape.m,
                    g.shape.n,
                    g.shape.k,
                    g.shape.trans_a,
                    g.shape.trans_b,
                ) == (m, n, k, ta, tb)
        })
    };
    assert!(has(4096, 4096, 1024, false, false));
    assert!(has(1024, 4096, 4096, true, false));
    assert!(has(4096, 1024, 4096, false, true));
    let d = dataset_gemms(DATASET_SIZE, DATASET_SEED);
    assert_eq!(d.len(), DATASET_SIZE);
    assert_eq!(d, dataset_gemms(DATASET_SIZE, DATASET_SEED));
    let mut labels: Vec<String> = d.iter().map(|s| s.to_string()).collect();
    labels.sort();
    labels.dedup();
    assert_eq!(labels.len(), DATASET_SIZE);
}

#[test]
fn csv_lists_parse_and_errors_name_line_and_column() {
    let ok = parse_gemm_csv(
        "M,N,K,transA,transB,dtype,count\n1024,4096,1024,0,1,f16,2\n# c\n64,64,64,T,N,f32\n",
    )
    .expect("valid");
    assert_eq!(ok.len(), 2);
    assert_eq!(ok[0].1, 2);
    assert!(ok[0].0.trans_b && !ok[0].0.trans_a);
    assert_eq!(ok[1].0.dtype, GemmDataType::F32);
    let e = parse_gemm_csv("1,2,3,0,0,f16\n1,x,3,0,0,f16\n").expect_err("bad N");
    assert_eq!((e.line, e.column), (2, 2));
    let e = parse_gemm_csv("1,2,3,0,0,f8\n").expect_err("bad dtype");
    assert_eq!((e.line, e.column), (1, 6));
    assert!(e.to_string().contains("f8"));
    let e = parse_gemm_csv("1,2,3,0\n").expect_err("short");
    assert_eq!(e.line, 1);
}
