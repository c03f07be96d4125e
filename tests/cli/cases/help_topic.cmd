help extra set
