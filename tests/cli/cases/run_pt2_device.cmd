run testdata/pt2/mlp_dynamic_aoti.pt2 --input 5x4 --device cuda
