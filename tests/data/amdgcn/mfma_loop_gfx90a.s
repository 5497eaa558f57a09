0000000000001700 <mfma_loop>:
	s_load_dword s6, s[4:5], 0x18                              // 000000001700: C0020182 00000018
	s_mov_b32 s0, 0                                            // 000000001708: BE800080
	s_waitcnt lgkmcnt(0)                                       // 00000000170C: BF8CC07F
	s_cmp_gt_i32 s6, 0                                         // 000000001710: BF028006
	s_cbranch_scc1 15                                          // 000000001714: BF85000F <mfma_loop+0x54>
	v_or_b32_e32 v6, 64, v0                                    // 000000001718: 280C00C0
	v_or_b32_e32 v10, 0x80, v0                                 // 00000000171C: 281400FF 00000080
	v_or_b32_e32 v8, 0xc0, v0                                  // 000000001724: 281000FF 000000C0
	s_mov_b64 s[2:3], 0                                        // 00000000172C: BE820180
	s_cbranch_execz 9                                          // 000000001730: BF880009 <mfma_loop+0x58>
	s_mov_b32 s2, s0                                           // 000000001734: BE820000
	s_mov_b32 s3, s0                                           // 000000001738: BE830000
	s_mov_b32 s1, s0                                           // 00000000173C: BE810000
	v_pk_mov_b32 v[4:5], s[2:3], s[2:3] op_sel:[0,1]           // 000000001740: D3B35004 18000402
	v_pk_mov_b32 v[2:3], s[0:1], s[0:1] op_sel:[0,1]           // 000000001748: D3B35002 18000000
	s_branch 85                                                // 000000001750: BF820055 <mfma_loop+0x1a8>
	s_mov_b64 s[2:3], -1                                       // 000000001754: BE8201C1
	s_load_dwordx2 s[0:1], s[4:5], 0x0                         // 000000001758: C0060002 00000000
	v_accvgpr_write_b32 a0, 0                                  // 000000001760: D3D94000 18000080
	v_lshlrev_b32_e32 v1, 4, v0                                // 000000001768: 24020084
	v_or_b32_e32 v6, 64, v0                                    // 00000000176C: 280C00C0
	v_or_b32_e32 v10, 0x80, v0                                 // 000000001770: 281400FF 00000080
	v_or_b32_e32 v8, 0xc0, v0                                  // 000000001778: 281000FF 000000C0
	v_accvgpr_mov_b32 a1, a0                                   // 000000001780: 7E02A500
	v_accvgpr_mov_b32 a2, a0                                   // 000000001784: 7E04A500
	v_accvgpr_mov_b32 a3, a0                                   // 000000001788: 7E06A500
	v_mov_b32_e32 v2, v0                                       // 00000000178C: 7E040300
	v_ashrrev_i32_e32 v3, 31, v2                               // 000000001790: 2206049F
	v_lshlrev_b64 v[4:5], 4, v[2:3]                            // 000000001794: D28F0004 00020484
	v_add_u32_e32 v12, 64, v2                                  // 00000000179C: 681804C0
	s_waitcnt lgkmcnt(0)                                       // 0000000017A0: BF8CC07F
	v_mov_b32_e32 v3, s1                                       // 0000000017A4: 7E060201
	v_add_co_u32_e32 v4, vcc, s0, v4                           // 0000000017A8: 32080800
	v_ashrrev_i32_e32 v13, 31, v12                             // 0000000017AC: 221A189F
	v_addc_co_u32_e32 v5, vcc, v3, v5, vcc                     // 0000000017B0: 380A0B03
	v_lshlrev_b64 v[12:13], 4, v[12:13]                        // 0000000017B4: D28F000C 00021884
	v_add_co_u32_e32 v20, vcc, s0, v12                         // 0000000017BC: 32281800
	v_addc_co_u32_e32 v21, vcc, v3, v13, vcc                   // 0000000017C0: 382A1B03
	global_load_dwordx4 v[12:15], v[4:5], off                  // 0000000017C4: DC5C8000 0C7F0004
	global_load_dwordx4 v[16:19], v[20:21], off                // 0000000017CC: DC5C8000 107F0014
	v_add_u32_e32 v4, 0x80, v2                                 // 0000000017D4: 680804FF 00000080
	v_ashrrev_i32_e32 v5, 31, v4                               // 0000000017DC: 220A089F
	v_lshlrev_b64 v[4:5], 4, v[4:5]                            // 0000000017E0: D28F0004 00020884
	v_add_u32_e32 v20, 0xc0, v2                                // 0000000017E8: 682804FF 000000C0
	v_add_co_u32_e32 v4, vcc, s0, v4                           // 0000000017F0: 32080800
	v_ashrrev_i32_e32 v21, 31, v20                             // 0000000017F4: 222A289F
	v_addc_co_u32_e32 v5, vcc, v3, v5, vcc                     // 0000000017F8: 380A0B03
	v_lshlrev_b64 v[20:21], 4, v[20:21]                        // 0000000017FC: D28F0014 00022884
	v_add_co_u32_e32 v28, vcc, s0, v20                         // 000000001804: 32382800
	v_addc_co_u32_e32 v29, vcc, v3, v21, vcc                   // 000000001808: 383A2B03
	global_load_dwordx4 v[20:23], v[4:5], off                  // 00000000180C: DC5C8000 147F0004
	global_load_dwordx4 v[24:27], v[28:29], off                // 000000001814: DC5C8000 187F001C
	s_add_i32 s6, s6, -1                                       // 00000000181C: 8106C106
	s_cmp_eq_u32 s6, 0                                         // 000000001820: BF068006
	v_add_u32_e32 v2, 0x100, v2                                // 000000001824: 680404FF 00000100
	s_waitcnt vmcnt(3)                                         // 00000000182C: BF8C0F73
	ds_write_b128 v1, v[12:15]                                 // 000000001830: D9BE0000 00000C01
	s_waitcnt vmcnt(2)                                         // 000000001838: BF8C0F72
	ds_write_b128 v1, v[16:19] offset:1024                     // 00000000183C: D9BE0400 00001001
	s_waitcnt vmcnt(1)                                         // 000000001844: BF8C0F71
	ds_write_b128 v1, v[20:23] offset:2048                     // 000000001848: D9BE0800 00001401
	s_waitcnt vmcnt(0)                                         // 000000001850: BF8C0F70
	ds_write_b128 v1, v[24:27] offset:3072                     // 000000001854: D9BE0C00 00001801
	s_waitcnt lgkmcnt(0)                                       // 00000000185C: BF8CC07F
	s_waitcnt lgkmcnt(0)                                       // 000000001860: BF8CC07F
	ds_read2st64_b64 v[12:15], v1 offset1:2                    // 000000001864: D8F00200 0C000001
	s_waitcnt lgkmcnt(0)                                       // 00000000186C: BF8CC07F
	v_mfma_f32_16x16x16f16 a[0:3], v[12:13], v[14:15], a[0:3]  // 000000001870: D3CD8000 04021D0C
	s_waitcnt lgkmcnt(0)                                       // 000000001878: BF8CC07F
	s_waitcnt lgkmcnt(0)                                       // 00000000187C: BF8CC07F
	s_cbranch_scc0 65475                                       // 000000001880: BF84FFC3 <mfma_loop+0x90>
	s_nop 7                                                    // 000000001884: BF800007
	v_accvgpr_read_b32 v5, a3                                  // 000000001888: D3D84005 18000103
	v_accvgpr_read_b32 v4, a2                                  // 000000001890: D3D84004 18000102
	v_accvgpr_read_b32 v3, a1                                  // 000000001898: D3D84003 18000101
	v_accvgpr_read_b32 v2, a0                                  // 0000000018A0: D3D84002 18000100
	s_load_dwordx4 s[0:3], s[4:5], 0x8                         // 0000000018A8: C00A0002 00000008
	v_lshlrev_b32_e32 v1, 2, v0                                // 0000000018B0: 24020082
	v_mov_b32_e32 v7, 0                                        // 0000000018B4: 7E0E0280
	v_mov_b32_e32 v11, v7                                      // 0000000018B8: 7E160307
	v_lshlrev_b64 v[10:11], 2, v[10:11]                        // 0000000018BC: D28F000A 00021482
	s_waitcnt lgkmcnt(0)                                       // 0000000018C4: BF8CC07F
	v_mov_b32_e32 v9, s1                                       // 0000000018C8: 7E120201
	v_add_co_u32_e32 v12, vcc, s0, v1                          // 0000000018CC: 32180200
	v_addc_co_u32_e32 v13, vcc, 0, v9, vcc                     // 0000000018D0: 381A1280
	flat_load_dword v1, v[12:13] glc                           // 0000000018D4: DC510000 0100000C
	s_waitcnt vmcnt(0)                                         // 0000000018DC: BF8C0F70
	v_lshlrev_b64 v[12:13], 2, v[6:7]                          // 0000000018E0: D28F000C 00020C82
	v_mov_b32_e32 v6, s1                                       // 0000000018E8: 7E0C0201
	v_add_co_u32_e32 v12, vcc, s0, v12                         // 0000000018EC: 32181800
	v_addc_co_u32_e32 v13, vcc, v6, v13, vcc                   // 0000000018F0: 381A1B06
	v_add_co_u32_e32 v10, vcc, s0, v10                         // 0000000018F4: 32141400
	v_mov_b32_e32 v9, v7                                       // 0000000018F8: 7E120307
	v_addc_co_u32_e32 v11, vcc, v6, v11, vcc                   // 0000000018FC: 38161706
	v_lshlrev_b64 v[6:7], 2, v[8:9]                            // 000000001900: D28F0006 00021082
	flat_load_dword v12, v[12:13] glc                          // 000000001908: DC510000 0C00000C
	s_waitcnt vmcnt(0)                                         // 000000001910: BF8C0F70
	v_mov_b32_e32 v8, s1                                       // 000000001914: 7E100201
	v_add_co_u32_e32 v6, vcc, s0, v6                           // 000000001918: 320C0C00
	flat_load_dword v10, v[10:11] glc                          // 00000000191C: DC510000 0A00000A
	s_waitcnt vmcnt(0)                                         // 000000001924: BF8C0F70
	v_addc_co_u32_e32 v7, vcc, v8, v7, vcc                     // 000000001928: 380E0F08
	flat_load_dword v6, v[6:7] glc                             // 00000000192C: DC510000 06000006
	s_waitcnt vmcnt(0)                                         // 000000001934: BF8C0F70
	v_add_f32_e32 v2, v2, v3                                   // 000000001938: 02040702
	v_add_f32_e32 v2, v4, v2                                   // 00000000193C: 02040504
	v_add_f32_e32 v2, v5, v2                                   // 000000001940: 02040505
	v_lshlrev_b32_e32 v0, 1, v0                                // 000000001944: 24000081
	s_waitcnt lgkmcnt(0)                                       // 000000001948: BF8CC07F
	v_add_f32_e32 v1, v1, v2                                   // 00000000194C: 02020501
	v_add_f32_e32 v1, v12, v1                                  // 000000001950: 0202030C
	v_add_f32_e32 v1, v10, v1                                  // 000000001954: 0202030A
	v_add_f32_e32 v1, v6, v1                                   // 000000001958: 02020306
	v_cvt_f16_f32_e32 v1, v1                                   // 00000000195C: 7E021501
	global_store_short v0, v1, s[2:3]                          // 000000001960: DC688000 00020100
	s_endpgm                                                   // 000000001968: BF810000
