run testdata/pt2/run/foreign_machine_aoti.pt2 --sample-inputs
