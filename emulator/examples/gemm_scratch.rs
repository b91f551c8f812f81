use nmcp_emulator::gpu::{catalog::Catalog, config::GpuConfig, gemm::*, sim::*, workload::*};
use nmcp_isa::gemm_ext::GemmDataType;
fn best(g:&GpuConfig,c:&Calibration,cat:&Catalog,s:&GemmShape)->(f64,usize){
  let mut b=(f64::INFINITY,0);
  for k in cat.kernels(){ if let Some(t)=isolated_time(g,c,s,k){ if t<b.0{b=(t,k.index as usize)} } }
  b
}
fn main(){
  let g=GpuConfig::mi100(); let c=Calibration::default(); let cat=Catalog::standard();
  println!("catalog {}", cat.len());
  let ev=evaluated_gemms(); println!("eval {} unique {}", ev.len(), unique_shapes(ev.iter().map(|a|&a.shape)).len());
  println!("dataset {}", dataset_gemms(1072, DATASET_SEED).len());
  let t0=std::time::Instant::now();
  for s in [GemmShape::new(1024,4096,1024,false,false,GemmDataType::F16),GemmShape::new(4096,4096,1024,false,false,GemmDataType::F16),GemmShape::new(1024,4096,4096,true,false,GemmDataType::F16),GemmShape::new(1024,1024,4096,false,true,GemmDataType::F16),GemmShape::new(1024,2048,1024,false,false,GemmDataType::F16),GemmShape::new(4096,128,1024,false,false,GemmDataType::F16),GemmShape::new(4096,256,1024,false,false,GemmDataType::F16),GemmShape::new(2048,512,8192,false,true,GemmDataType::F16),GemmShape::new(12288,8192,4096,false,false,GemmDataType::F16),GemmShape::new(4096,4096,8192,false,true,GemmDataType::F16)]{
    let (t,ki)=best(&g,&c,&cat,&s); let k=cat.get(ki).unwrap();
    let eff=s.flops()/t/g.peak_flops_per_ns(s.dtype);
    let mut line=format!("{:>22} t={:8.1}us eff={:.2} {} ", s.label(), t/1e3, eff, k.name());
    for cd in [2u32,4,8,16]{ let tc=concurrent_time(&g,&c,&s,k,cd).unwrap(); line+=&format!(" cd{}:{:.2}", cd, t*cd as f64/tc); }
    // GPU/2, /4 best
    for d in [2,4]{ let gd=g.constrained(d); let (_,kd)=best(&gd,&c,&cat,&s); let kk=cat.get(kd).unwrap(); let tc=concurrent_time(&g,&c,&s,kk,d).unwrap(); line+=&format!(" go{}:{} {:.2}", d, kk.name(), t*d as f64/tc); }
    println!("{line}");
  }
  println!("elapsed {:?}", t0.elapsed());
}
