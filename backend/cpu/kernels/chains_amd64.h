// The 16 chains of two float64 sums: chains 4j..4j+3 of the first (at DI)
// in Y(j), of the second (at DX) in Y(4+j).
#define loadChains \
	VMOVUPD 0(DI), Y0; VMOVUPD 0(DX), Y4; \
	VMOVUPD 32(DI), Y1; VMOVUPD 32(DX), Y5; \
	VMOVUPD 64(DI), Y2; VMOVUPD 64(DX), Y6; \
	VMOVUPD 96(DI), Y3; VMOVUPD 96(DX), Y7

#define storeChains \
	VMOVUPD Y0, 0(DI); VMOVUPD Y4, 0(DX); \
	VMOVUPD Y1, 32(DI); VMOVUPD Y5, 32(DX); \
	VMOVUPD Y2, 64(DI); VMOVUPD Y6, 64(DX); \
	VMOVUPD Y3, 96(DI); VMOVUPD Y7, 96(DX)
