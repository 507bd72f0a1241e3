:: Builds mmcv with its ops into the host prefix on Windows (see build.sh for the variables used).
@echo on
setlocal EnableDelayedExpansion

:: nvcc needs 1-2 GB of memory per job: at most 4 jobs unless the caller set MAX_JOBS.
if "%MAX_JOBS%"=="" (
    set "MAX_JOBS=2"
    if defined CPU_COUNT set "MAX_JOBS=%CPU_COUNT%"
    if !MAX_JOBS! GTR 4 set "MAX_JOBS=4"
)
echo mmcv build: MAX_JOBS=!MAX_JOBS!

if "%FORCE_CUDA%"=="1" (
    rem nvcc runs from the build prefix; cudart.lib and the CUDA headers come from the host
    rem prefix (%LIBRARY_PREFIX%), which the vs2022 activation puts on LIB and INCLUDE.
    set "CUDA_HOME=%BUILD_PREFIX%\Library"
    rem The channel's arch table; build.sh says why the list is set explicitly.
    "%PYTHON%" arch-table\cuda_arch_list.py arch-table %cuda_compiler_version% %target_platform% --output arch_list.txt
    if errorlevel 1 exit 1
    set /p TORCH_CUDA_ARCH_LIST=<arch_list.txt
    del arch_list.txt
    echo mmcv build: TORCH_CUDA_ARCH_LIST=!TORCH_CUDA_ARCH_LIST!
)

:: setuptools compiles with the MSVC that vs2022_win-64 activated (the CRT then comes from the
:: vc14_runtime/ucrt conda packages, not from a system VC++ redistributable).
set DISTUTILS_USE_SDK=1

"%PYTHON%" -m pip install . -vv --no-deps --no-build-isolation
if errorlevel 1 exit 1
