// placeholder so the module library is never empty; removed when the module has code.
