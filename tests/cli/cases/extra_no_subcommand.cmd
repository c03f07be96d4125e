extra
